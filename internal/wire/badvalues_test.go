package wire

import (
	"bytes"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// nodeRec records each node's ticks (time and first value) and gaps.
type nodeRec struct {
	NopHandler
	ticks map[string][]time.Time
	first map[string][]float64
	gaps  map[string][][2]time.Time
}

func (r *nodeRec) Tick(node string, t time.Time, _ []*metric.Desc, v []float64) {
	r.ticks[node] = append(r.ticks[node], t)
	r.first[node] = append(r.first[node], v[0])
}

func (r *nodeRec) Gap(node string, from, to time.Time) {
	r.gaps[node] = append(r.gaps[node], [2]time.Time{from, to})
}

// TestBadValuesCostOnlyTheirStream: a values frame whose codes do not
// decode is dropped with its stream's frames up to the next keyframe: a
// gap at the first lost tick at once, one over all of them when the
// stream resumes; the connection and the other streams go on, the sender
// is asked for a keyframe once, and the stream decodes exactly again.
func TestBadValuesCostOnlyTheirStream(t *testing.T) {
	descs := make([]*metric.Desc, 6)
	for i := range descs {
		descs[i] = metric.NewDesc("v", "", metric.Gauge, "i", strconv.Itoa(i))
	}
	enc := NewEncoder()
	enc.SetKeyframeEvery(8)
	a, b := enc.NewStream("a"), enc.NewStream("b")
	type frame struct {
		typ     byte
		payload []byte
		node    string
		t       time.Time
	}
	var frames []frame
	value := func(k, i int) float64 { return float64(k*k+i) * 1.25 }
	for k := range 20 {
		ts := time.Unix(1_700_000_000+int64(k), 0)
		for _, s := range []*Stream{a, b} {
			v := make([]float64, len(descs))
			for i := range v {
				v[i] = value(k, i)
				if i == 5 {
					v[i] = math.Float64frombits(uint64(k) * 0x9e3779b97f4a7c15) // float codes
				}
			}
			out, err := enc.AppendTick(nil, s, ts, descs, v)
			if err != nil {
				t.Fatal(err)
			}
			for fr := NewFrameReader(bytes.NewReader(out), 0); ; {
				typ, p, err := fr.Next()
				if err != nil {
					break
				}
				frames = append(frames, frame{typ, append([]byte(nil), p...), s.Node(), ts})
			}
		}
	}
	// Corrupt a's values frame of tick 3: one byte past its codes.
	bad := -1
	for i, f := range frames {
		if f.node == "a" && f.typ&^frameKey == frameValues && f.t.Unix() == 1_700_000_003 {
			frames[i].payload = append(f.payload, 0xff)
			bad = i
		}
	}
	if bad < 0 {
		t.Fatal("no values frame of a at tick 3")
	}
	dec := NewDecoder(Limits{}, nil)
	rec := &nodeRec{ticks: map[string][]time.Time{}, first: map[string][]float64{}, gaps: map[string][][2]time.Time{}}
	for i, f := range frames {
		if err := dec.Decode(f.typ, f.payload, rec); err != nil {
			t.Fatalf("frame %d: %v: a bad values frame ended the connection", i, err)
		}
	}
	if dec.BadFrames != 1 {
		t.Errorf("BadFrames %d, want 1", dec.BadFrames)
	}
	if len(dec.keyReq) != 1 || dec.keyReq[0] != a.id {
		t.Errorf("keyframe requests %v, want stream a's (%d) once", dec.keyReq, a.id)
	}
	if len(rec.ticks["b"]) != 20 || len(rec.gaps["b"]) != 0 {
		t.Errorf("b: %d ticks, %d gaps; want 20 and 0", len(rec.ticks["b"]), len(rec.gaps["b"]))
	}
	// a: ticks 0-2, a gap at 3, then one over 3-7 with the keyframe at 8.
	at := func(k int64) time.Time { return time.Unix(1_700_000_000+k, 0) }
	if g := rec.gaps["a"]; len(g) != 2 || !g[0][0].Equal(at(3)) || !g[0][1].Equal(at(3)) || !g[1][0].Equal(at(3)) || !g[1][1].Equal(at(7)) {
		t.Fatalf("a's gaps %v, want [3 3] and [3 7]", g)
	}
	if len(rec.ticks["a"]) != 15 {
		t.Fatalf("a: %d ticks, want 15", len(rec.ticks["a"]))
	}
	for j, ts := range rec.ticks["a"] {
		k := int(ts.Unix() - 1_700_000_000)
		if k >= 3 && k < 8 {
			t.Fatalf("a's tick %d decoded while waiting for a keyframe", k)
		}
		if got := rec.first["a"][j]; got != value(k, 0) {
			t.Fatalf("a's tick %d: first value %v, want %v", k, got, value(k, 0))
		}
	}
}
