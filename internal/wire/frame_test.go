package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// validStream is a few ticks of two nodes, with a schema change.
func validStream(t testing.TB) []byte {
	d := []*metric.Desc{
		metric.NewDesc("node_load1", "1m load average.", metric.Gauge),
		metric.NewDesc("node_cpu_seconds_total", "cpu", metric.Counter, "cpu", "0", "mode", "user"),
		metric.NewDesc("node_cpu_seconds_total", "cpu", metric.Counter, "cpu", "0", "mode", "idle"),
	}
	enc := NewEncoder()
	a, b := enc.NewStream("cn00001"), enc.NewStream("cn00002")
	var out []byte
	var err error
	for i := range 4 {
		if i == 2 {
			a.Keyframe()
		}
		ts := time.Unix(1000+int64(i), 0)
		vals := []float64{0.52 + float64(i)/100, 100.25 + float64(i), math.NaN()}
		if out, err = enc.AppendTick(out, a, ts, d, vals); err != nil {
			t.Fatal(err)
		}
		if out, err = enc.AppendTick(out, b, ts, d[:i%3+1], vals[:i%3+1]); err != nil {
			t.Fatal(err)
		}
	}
	out = AppendGap(out, "cn00003", time.Unix(1, 0), time.Unix(3, 0))
	out = AppendNodeState(out, "cn00003", true, time.Unix(4, 0))
	return appendFrame(out, framePing, nil)
}

func decodeBytes(data []byte, lim Limits) (int, error) {
	fr := NewFrameReader(bytes.NewReader(data), lim.MaxFrame)
	dec := NewDecoder(lim, NewInterner(1000))
	frames := 0
	for {
		typ, payload, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return frames, nil
		}
		if err != nil {
			return frames, err
		}
		if err := dec.Decode(typ, payload, NopHandler{}); err != nil {
			return frames, err
		}
		frames++
	}
}

func TestDecodeValid(t *testing.T) {
	n, err := decodeBytes(validStream(t), Limits{})
	if err != nil || n != 5+8+3 {
		t.Fatalf("decoded %d frames, err %v", n, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	valid := validStream(t)
	corrupt := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(valid)) }
	schemaPayload := func(id uint64, flags byte, node string, rest ...byte) []byte {
		p := binary.AppendUvarint(nil, id)
		p = append(p, flags)
		p = appendString(p, node)
		return append(p, rest...)
	}
	cases := []struct {
		name string
		data []byte
		lim  Limits
		want error
	}{
		{"truncated header", valid[:3], Limits{}, io.ErrUnexpectedEOF},
		{"truncated body", valid[:20], Limits{}, io.ErrUnexpectedEOF},
		{"bad checksum", corrupt(func(b []byte) []byte { b[10] ^= 0x40; return b }), Limits{}, ErrChecksum},
		{"bad version", corrupt(func(b []byte) []byte { b[4] = 9; return b }), Limits{}, ErrVersion},
		{"oversized", valid, Limits{MaxFrame: 8}, ErrFrameTooLarge},
		{"unknown type", appendFrame(nil, 99, nil), Limits{}, ErrUnknownFrame},
		{"hello after handshake", appendFrame(nil, frameHello, nil), Limits{}, ErrUnknownFrame},
		{"values before schema", appendFrame(nil, frameValues, []byte{1, 0, 0}), Limits{}, ErrMalformed},
		{"schema not reset first", appendFrame(nil, frameSchema, schemaPayload(1, 0, "n", 0, 0)), Limits{}, ErrMalformed},
		{"empty node", appendFrame(nil, frameSchema, schemaPayload(1, 1, "", 0, 0)), Limits{}, ErrMalformed},
		{"index out of table", appendFrame(nil, frameSchema, schemaPayload(1, 1, "n", 0, 1, 4)), Limits{}, ErrMalformed},
		{"forged count", appendFrame(nil, frameSchema, schemaPayload(1, 1, "n", 0xff, 0xff, 0xff, 0x7f)), Limits{}, ErrLimit},
		{"copy from unknown stream", appendFrame(nil, frameSchema, schemaPayload(1, 1, "n", 1, descCopy, 9, 0, 1, 1, 0, 1)), Limits{}, ErrMalformed},
		{"copy beyond the frame count", appendFrame(nil, frameSchema, schemaPayload(1, 1, "n", 1, descCopy, 1, 0, 2, 1, 0, 1)), Limits{}, ErrMalformed},
		{"bad desc type", appendFrame(nil, frameSchema, schemaPayload(1, 1, "n", 1, 0, 7, 1, 'x', 0, 0, 0)), Limits{}, ErrMalformed},
		{"trailing bytes", appendFrame(nil, frameGap, append(AppendGap(nil, "n", time.Unix(1, 0), time.Unix(2, 0))[headerSize:20], 0)), Limits{}, ErrMalformed},
		{"too many streams", valid, Limits{MaxStreams: 1}, ErrLimit},
		{"too many series", valid, Limits{MaxSeries: 2}, ErrLimit},
		{"too many in total", valid, Limits{MaxTotalSeries: 4}, ErrLimit},
		{"bad node state", appendFrame(nil, frameNodeState, append(appendString(nil, "n"), 2, 0)), Limits{}, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeBytes(c.data, c.lim)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

// A length field claiming the maximum must not make the reader allocate it
// before the bytes arrive.
func TestForgedLengthDoesNotAllocate(t *testing.T) {
	hdr := []byte{0, 0xff, 0xff, 0xff, Version, frameValues, 1, 2, 3}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fr := NewFrameReader(bytes.NewReader(hdr), 1<<24)
	if _, _, err := fr.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("err = %v", err)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Errorf("allocated %d bytes for a 9-byte input", d)
	}
}

func FuzzDecode(f *testing.F) {
	valid := validStream(f)
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{0, 0, 0, 0, Version, framePing, 0, 0, 0, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(appendHello(nil, hello{keyed: true, nonce: make([]byte, nonceSize), name: "cn1", mac: make([]byte, macSize)})[headerSize:])
	lim := Limits{MaxFrame: 1 << 16, MaxStreams: 16, MaxSeries: 256, MaxTotalSeries: 1024}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Also try the input with valid framing, so the fuzzer reaches the
		// payload decoders without having to forge checksums.
		_, _ = decodeBytes(data, lim)
		_, _ = parseHello(data, true)
		if len(data) > 0 {
			types := [...]byte{frameSchema, frameValues, frameValues | frameKey, frameGap, frameNodeState}
			framed := appendFrame(nil, types[int(data[0])%len(types)], data[1:])
			// After the valid stream, so the frame can refer to its streams.
			_, _ = decodeBytes(append(bytes.Clone(valid), framed...), lim)
		}
	})
}

// FuzzValues: any sequence of float64s survives the value codec bit for bit.
func FuzzValues(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	f.Add(binary.LittleEndian.AppendUint64(nil, math.Float64bits(0.52)))
	f.Fuzz(func(t *testing.T, data []byte) {
		var w bitWriter
		var enc, dec valState
		var want []float64
		for len(data) >= 8 {
			u := binary.LittleEndian.Uint64(data)
			data = data[8:]
			v := math.Float64frombits(u)
			if len(data)%16 == 8 { // mix in decimal-looking values
				v = math.Round(v*100) / 100
			}
			want = append(want, v)
			encodeValue(&w, &enc, v)
		}
		r := bitReader{buf: w.flush()}
		for i, v := range want {
			got, ok := decodeValue(&r, &dec)
			if !ok || math.Float64bits(got) != math.Float64bits(v) {
				t.Fatalf("value %d: got %v (%#x) ok=%v, want %v (%#x)", i, got, math.Float64bits(got), ok, v, math.Float64bits(v))
			}
		}
		if dec != enc {
			t.Fatalf("states diverged: %+v vs %+v", dec, enc)
		}
	})
}

type lastTick struct {
	NopHandler
	descs  []*metric.Desc
	values []float64
}

func (h *lastTick) Tick(_ string, _ time.Time, d []*metric.Desc, v []float64) {
	h.descs, h.values = append(h.descs[:0], d...), append(h.values[:0], v...)
}

// Series that come and go (top processes) must not grow the tables.
func TestChurnCompactsTable(t *testing.T) {
	stable := make([]*metric.Desc, 10)
	for i := range stable {
		stable[i] = metric.NewDesc("s", "h", metric.Gauge, "i", strconv.Itoa(i))
	}
	enc := NewEncoder()
	st := enc.NewStream("n")
	dec := NewDecoder(Limits{}, nil)
	var h lastTick
	maxTable := 0
	for tick := range 500 {
		descs := append([]*metric.Desc(nil), stable...)
		vals := make([]float64, len(descs))
		for i := range vals {
			vals[i] = float64(tick * i)
		}
		// Three short-lived series, one replaced each tick.
		for k := range 3 {
			descs = append(descs, metric.NewDesc("proc_cpu", "p", metric.Counter, "pid", strconv.Itoa(tick-k)))
			vals = append(vals, float64(tick*k)+0.5)
		}
		out, err := enc.AppendTick(nil, st, time.Unix(int64(tick), 0), descs, vals)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := decodeAllInto(dec, &h, out); err != nil || n == 0 {
			t.Fatalf("tick %d: %v", tick, err)
		}
		for i := range descs {
			if h.descs[i].Labels[0] != descs[i].Labels[0] || h.values[i] != vals[i] {
				t.Fatalf("tick %d series %d: got %v=%v, want %v=%v", tick, i, h.descs[i].Labels, h.values[i], descs[i].Labels, vals[i])
			}
		}
		ds := dec.stream(st.id)
		if ds.descs.Len() != st.descs.Len() {
			t.Fatalf("tick %d: tables differ: encoder %d, decoder %d", tick, st.descs.Len(), ds.descs.Len())
		}
		maxTable = max(maxTable, st.descs.Len())
	}
	if limit := tableLimit(13); maxTable > limit {
		t.Errorf("table grew to %d entries, limit %d", maxTable, limit)
	}
	// Each tick adds three entries (new pointers for the same pids).
	if maxTable <= tableLimit(13)-3 {
		t.Errorf("table peaked at %d, limit %d: compaction is too eager", maxTable, tableLimit(13))
	}
}

func decodeAllInto(dec *Decoder, h Handler, data []byte) (int, error) {
	fr := NewFrameReader(bytes.NewReader(data), 0)
	n := 0
	for {
		typ, payload, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if err := dec.Decode(typ, payload, h); err != nil {
			return n, err
		}
		n++
	}
}
