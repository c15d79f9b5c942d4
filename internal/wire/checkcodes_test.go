package wire

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// checkCodesOneByOne is checkCodes as it was before zero codes were taken
// in runs: one code at a time, the reference for the faster one.
func checkCodesOneByOne(body []byte, runs []int32, st []chkState) bool {
	end := uint(len(body)) * 8
	pos := uint(0)
	for r := 0; r+1 < len(runs); r += 2 {
		for i := runs[r]; i < runs[r]+runs[r+1]; i++ {
			if pos >= end {
				return false
			}
			w := peek64(body, pos)
			ones := uint(bits.LeadingZeros64(^w))
			switch {
			case ones == 0:
				pos++
			case ones <= 3:
				if st[i] != 0 {
					return false
				}
				pos += ones + 1 + [4]uint{0, 7, 14, 24}[ones]
			case ones == 4:
				if st[i] != 0 {
					return false
				}
				pos += 5 + 6 + uint(w>>(64-11)&63) + 1
			case ones == 5:
				if w>>(64-10)&15 > maxScale {
					return false
				}
				pos += 6 + 4 + 6 + uint(w>>(64-16)&63) + 1
				st[i] = 0
			default:
				if w>>(64-7)&1 == 0 {
					if st[i] == 0 {
						return false
					}
					pos += 7 + uint(st[i])
					break
				}
				lead, n := w>>(64-13)&63, w>>(64-19)&63+1
				if lead+n > 64 {
					return false
				}
				pos += 19 + uint(n)
				st[i] = chkState(n)
			}
			if pos > end {
				return false
			}
		}
	}
	return (pos+7)/8 == uint(len(body))
}

// randomCodes returns a body of mostly zero bits (long runs of exact
// predictions, as real streams have) and an order of runs over a table.
func randomCodes(rng *rand.Rand) ([]byte, []int32, []chkState) {
	body := make([]byte, rng.IntN(64))
	density := rng.IntN(8) // ones per 64 bits, about
	for i := range body {
		for b := range 8 {
			if rng.IntN(64) < density {
				body[i] |= 0x80 >> b
			}
		}
	}
	table := 1 + rng.IntN(600)
	var runs []int32
	for range 1 + rng.IntN(4) {
		start := rng.IntN(table)
		runs = append(runs, int32(start), int32(rng.IntN(table-start+1)))
	}
	st := make([]chkState, table)
	for i := range st {
		if rng.IntN(4) == 0 {
			st[i] = chkState(1 + rng.IntN(64))
		}
	}
	return body, runs, st
}

// TestCheckCodesZeroRuns: taking exact predictions in runs gives the
// one-code-at-a-time verdict and states on bodies of long zero runs that
// end anywhere: inside a run of the order, at a run's border, past the
// body's end, or with bits left over.
func TestCheckCodesZeroRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 1))
	ok := 0
	for n := range 200_000 {
		body, runs, st := randomCodes(rng)
		st2 := slices.Clone(st)
		want := checkCodesOneByOne(body, runs, st)
		got := checkCodes(body, runs, st2)
		if got != want || (want && !slices.Equal(st, st2)) {
			t.Fatalf("case %d: body %x runs %v: verdict %v, want %v (states equal: %v)", n, body, runs, got, want, slices.Equal(st, st2))
		}
		if want {
			ok++
		}
	}
	if ok < 1000 {
		t.Errorf("only %d of 200,000 cases valid: the zero runs are not exercised", ok)
	}
}

// captureRelay keeps a copy of each values frame's codes and order.
type captureRelay struct {
	NopHandler
	frames []capturedFrame
}

type capturedFrame struct {
	body  []byte
	runs  []int32
	table int
}

func (*captureRelay) RelaySchema(string, *RelaySchema) {}

func (c *captureRelay) RelayTick(_ string, _ time.Time, f *RelayFrame) {
	// Body starts after the stream id: skip the time and the value count.
	p := payloadReader{b: f.Body}
	p.varint("time")
	p.uvarint("value count")
	c.frames = append(c.frames, capturedFrame{slices.Clone(p.b), slices.Clone(f.Runs), f.Table.Len()})
}

// BenchmarkCheckCodes checks values frames of 320 series, 7 in 10 of them
// counters at a steady rate (exact predictions, about the share in the
// simulated nodes' frames), with both checkers in the same run.
func BenchmarkCheckCodes(b *testing.B) {
	enc := NewEncoder()
	s := enc.NewStream("cn1")
	descs := make([]*metric.Desc, 320)
	for i := range descs {
		descs[i] = metric.NewDesc("s", "", metric.Counter, "i", strconv.Itoa(i))
	}
	rng := rand.New(rand.NewPCG(3, 3))
	vals := make([]float64, len(descs))
	dec := NewDecoder(Limits{}, nil)
	h := &captureRelay{}
	t0 := time.Unix(1_763_800_000, 0)
	for k := range 128 {
		for i := range vals {
			if i%10 < 7 {
				vals[i] = float64(k * (i%5 + 1))
			} else {
				vals[i] += float64(rng.IntN(1000))
			}
		}
		buf, err := enc.AppendTick(nil, s, t0.Add(time.Duration(k)*time.Second), descs, vals)
		if err != nil {
			b.Fatal(err)
		}
		fr := NewFrameReader(bytes.NewReader(buf), 0)
		for {
			typ, payload, err := fr.Next()
			if err != nil {
				break
			}
			if err := dec.Decode(typ, payload, h); err != nil {
				b.Fatal(err)
			}
		}
	}
	frames := h.frames
	for _, c := range []struct {
		name string
		f    func([]byte, []int32, []chkState) bool
	}{{"one-by-one", checkCodesOneByOne}, {"zero-runs", checkCodes}} {
		b.Run(c.name, func(b *testing.B) {
			st := make([]chkState, len(descs))
			var values, i int
			for b.Loop() {
				if i == len(frames) {
					i = 0
					clear(st) // the first frame is a keyframe
				}
				f := &frames[i]
				if !c.f(f.body, f.runs, st[:f.table]) {
					b.Fatalf("frame %d refused", i)
				}
				for r := 1; r < len(f.runs); r += 2 {
					values += int(f.runs[r])
				}
				i++
			}
			b.ReportMetric(float64(values)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// TestDecoderStreamIDs: streams are found by id whatever the ids (dense as
// an encoder gives them, huge, or dense after being sparse), and the
// dense index stays within twice the streams held whatever ids a peer
// picks.
func TestDecoderStreamIDs(t *testing.T) {
	d := NewDecoder(Limits{}, nil)
	rng := rand.New(rand.NewPCG(5, 5))
	held := map[uint64]*decStream{}
	for n := range 5000 {
		var id uint64
		switch rng.IntN(3) {
		case 0:
			id = uint64(n) // dense
		case 1:
			id = rng.Uint64() // anywhere
		default:
			id = uint64(rng.IntN(3 * (n + 1))) // near the count
		}
		if held[id] != nil {
			continue
		}
		if d.stream(id) != nil {
			t.Fatalf("stream %d found before it was added", id)
		}
		s := &decStream{node: strconv.FormatUint(id, 10)}
		d.addStream(id, s)
		held[id] = s
		if len(d.dense) > 2*len(held)+64 {
			t.Fatalf("%d streams, dense index of %d", len(held), len(d.dense))
		}
	}
	for id, s := range held {
		if got := d.stream(id); got != s {
			t.Fatalf("stream %d: got %p, want %p", id, got, s)
		}
	}
	if d.nstreams != len(held) || len(d.sparse)+countNonNil(d.dense) != len(held) {
		t.Fatalf("%d streams counted, %d sparse + %d dense, want %d", d.nstreams, len(d.sparse), countNonNil(d.dense), len(held))
	}
}

func countNonNil(ss []*decStream) int {
	n := 0
	for _, s := range ss {
		if s != nil {
			n++
		}
	}
	return n
}
