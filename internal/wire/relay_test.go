package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// relayRec is a RelayHandler recording what the checker reports.
type relayRec struct {
	NopHandler
	t time.Time
	n int
}

func (r *relayRec) RelaySchema(string, *RelaySchema) {}
func (r *relayRec) RelayTick(_ string, t time.Time, f *RelayFrame) {
	r.t, r.n = t, f.N
}

// tickRec records what the full decoder reports.
type tickRec struct {
	NopHandler
	t time.Time
	n int
}

func (r *tickRec) Tick(_ string, t time.Time, _ []*metric.Desc, v []float64) { r.t, r.n = t, len(v) }

// checkStream encodes ticks of a few streams whose values take every kind
// of code (counters, decimals, noise, NaN, infinities, values that leave
// and re-enter float mode) and whose series change, with keyframes; it
// returns the frames.
func checkStream(seed uint64, ticks int) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	enc := NewEncoder()
	enc.SetKeyframeEvery(9)
	var descs []*metric.Desc
	for i := range 12 {
		descs = append(descs, metric.NewDesc("s", "", metric.Gauge, "i", strconv.Itoa(i)))
	}
	streams := []*Stream{enc.NewStream("a"), enc.NewStream("b")}
	var out []byte
	for k := range ticks {
		for si, s := range streams {
			d := descs[:8+(k+si)%5]
			if k%4 == 3 { // an order of many runs
				d = slices.Clone(d)
				slices.Reverse(d)
			}
			v := make([]float64, len(d))
			for i := range v {
				switch (i + k/7) % 6 {
				case 0:
					v[i] = float64(100*k+i) / 100
				case 1:
					v[i] = rng.Float64() * 1e6
				case 2:
					v[i] = []float64{math.NaN(), math.Inf(-1), math.Copysign(0, -1), 1e-300}[rng.IntN(4)]
				case 3:
					v[i] = float64(rng.IntN(1 << 40))
				case 4:
					v[i] = float64(k % 3)
				default:
					v[i] = math.Float64frombits(rng.Uint64())
				}
			}
			var err error
			out, err = enc.AppendTick(out, s, time.Unix(1_700_000_000+int64(k), int64(rng.IntN(1000))), d, v)
			if err != nil {
				panic(err)
			}
		}
	}
	var frames [][]byte
	fr := NewFrameReader(bytes.NewReader(out), 0)
	for {
		typ, payload, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			panic(err)
		}
		frames = append(frames, append([]byte{typ}, payload...))
	}
}

// sameVerdicts feeds frames (type byte, payload) to a full decoder and to
// a checker (CheckRelayed) and fails where they disagree: one refuses a
// frame the other takes, or they read another time or count. The decoder
// refuses a values frame by dropping it (BadFrames), the checker with an
// error. It stops at the first refused frame and returns how many frames
// were taken.
func sameVerdicts(t *testing.T, frames [][]byte) int {
	t.Helper()
	lim := Limits{MaxFrame: 1 << 16, MaxStreams: 16, MaxSeries: 256, MaxTotalSeries: 1024}
	full, chk := NewDecoder(lim, nil), NewDecoder(lim, nil)
	chk.CheckRelayed = true
	var tr tickRec
	var rr relayRec
	for i, f := range frames {
		if len(f) == 0 {
			continue
		}
		tr, rr = tickRec{}, relayRec{}
		bad := full.BadFrames
		e1 := full.Decode(f[0], f[1:], &tr)
		e2 := chk.Decode(f[0], f[1:], &rr)
		dropped := full.BadFrames != bad
		if e1 != nil && dropped {
			t.Fatalf("frame %d: the decoder both dropped the frame and failed: %v", i, e1)
		}
		if (e1 == nil && !dropped) != (e2 == nil) {
			t.Fatalf("frame %d (type %d, %d bytes): decoder says %v (dropped %v), checker %v", i, f[0], len(f)-1, e1, dropped, e2)
		}
		if e1 != nil || dropped {
			return i
		}
		if !tr.t.Equal(rr.t) || tr.n != rr.n {
			t.Fatalf("frame %d: decoder read %d values at %v, checker %d at %v", i, tr.n, tr.t, rr.n, rr.t)
		}
	}
	return len(frames)
}

// TestCheckerMatchesDecoder: on valid streams and on many corruptions of
// them (bits flipped, bytes cut or added in values frames), the checker
// takes and refuses exactly the frames the decoder does.
func TestCheckerMatchesDecoder(t *testing.T) {
	refused := 0
	for seed := range uint64(40) {
		frames := checkStream(seed, 30)
		if n := sameVerdicts(t, frames); n != len(frames) {
			t.Fatalf("seed %d: a valid stream refused at frame %d", seed, n)
		}
		rng := rand.New(rand.NewPCG(seed, 11))
		for range 50 {
			mut := make([][]byte, len(frames))
			copy(mut, frames)
			i := rng.IntN(len(frames))
			for frames[i][0]&^frameKey != frameValues {
				i = rng.IntN(len(frames))
			}
			f := bytes.Clone(frames[i])
			switch rng.IntN(4) {
			case 0, 1:
				for range 1 + rng.IntN(3) {
					b := 1 + rng.IntN(len(f)-1)
					f[b] ^= 1 << rng.IntN(8)
				}
			case 2:
				f = f[:1+rng.IntN(len(f)-1)]
			default:
				f = append(f, byte(rng.Uint32()))
			}
			mut[i] = f
			if sameVerdicts(t, mut) < len(mut) {
				refused++
			}
		}
	}
	if refused < 500 {
		t.Errorf("only %d of 2,000 corrupted streams refused: the corruptions do not reach the checks", refused)
	}
}

// FuzzCheck: any sequence of frames gets the same verdicts from the
// checker as from the decoder. The input is frames as (type selector,
// 2-byte length, payload); the seeds are valid streams.
func FuzzCheck(f *testing.F) {
	for seed := range uint64(4) {
		var in []byte
		for _, fr := range checkStream(seed, 12) {
			sel := byte(0)
			for i, typ := range checkTypes {
				if typ == fr[0] {
					sel = byte(i)
				}
			}
			in = append(in, sel)
			in = binary.BigEndian.AppendUint16(in, uint16(len(fr)-1))
			in = append(in, fr[1:]...)
		}
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var frames [][]byte
		for len(data) >= 3 {
			typ := checkTypes[int(data[0])%len(checkTypes)]
			n := min(int(binary.BigEndian.Uint16(data[1:])), len(data)-3)
			frames = append(frames, append([]byte{typ}, data[3:3+n]...))
			data = data[3+n:]
		}
		sameVerdicts(t, frames)
	})
}

var checkTypes = [...]byte{frameSchema, frameValues, frameValues | frameKey, frameGap}

// TestCheckDoesNotAllocate: checking a steady stream's values frame and
// handing it to the relay allocates nothing.
func TestCheckDoesNotAllocate(t *testing.T) {
	enc := NewEncoder()
	enc.SetKeyframeEvery(1) // every frame after the first decodes alone
	s := enc.NewStream("cn1")
	descs := make([]*metric.Desc, 300)
	vals := make([]float64, len(descs))
	for i := range descs {
		descs[i] = metric.NewDesc("s", "", metric.Gauge, "i", strconv.Itoa(i))
		vals[i] = float64(i) / 7
	}
	var frames [][]byte
	for k := range 2 {
		out, err := enc.AppendTick(nil, s, time.Unix(int64(k), 0), descs, vals)
		if err != nil {
			t.Fatal(err)
		}
		fr := NewFrameReader(bytes.NewReader(out), 0)
		for {
			typ, payload, err := fr.Next()
			if err != nil {
				break
			}
			frames = append(frames, append([]byte{typ}, payload...))
		}
	}
	key := frames[len(frames)-1]
	if key[0] != frameValues|frameKey {
		t.Fatalf("last frame is type %d, want a keyframe", key[0])
	}
	dec := NewDecoder(Limits{}, nil)
	var h relayRec
	for _, f := range frames {
		if err := dec.Decode(f[0], f[1:], &h); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := dec.Decode(key[0], key[1:], &h); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per checked tick", n)
	}
	if h.n != len(descs) {
		t.Errorf("relayed %d values, want %d", h.n, len(descs))
	}
}
