package wire_test

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// recorder is a Handler keeping copies of what it was given.
type recorder struct {
	mu      sync.Mutex
	schemas int
	ticks   []tick
	gaps    []gap
	states  []state
	conns   int
	discErr []error
}

type tick struct {
	node   string
	t      time.Time
	descs  []*metric.Desc
	values []float64
}

type gap struct {
	node     string
	from, to time.Time
}

type state struct {
	node string
	up   bool
	t    time.Time
}

func (r *recorder) Connect(wire.Peer) { r.mu.Lock(); r.conns++; r.mu.Unlock() }
func (r *recorder) Disconnect(_ wire.Peer, err error) {
	r.mu.Lock()
	r.discErr = append(r.discErr, err)
	r.mu.Unlock()
}
func (r *recorder) Schema(string, []*metric.Desc) { r.mu.Lock(); r.schemas++; r.mu.Unlock() }
func (r *recorder) Tick(node string, t time.Time, d []*metric.Desc, v []float64) {
	r.mu.Lock()
	r.ticks = append(r.ticks, tick{node, t, slices.Clone(d), slices.Clone(v)})
	r.mu.Unlock()
}
func (r *recorder) Gap(node string, from, to time.Time) {
	r.mu.Lock()
	r.gaps = append(r.gaps, gap{node, from, to})
	r.mu.Unlock()
}
func (r *recorder) NodeState(node string, up bool, t time.Time) {
	r.mu.Lock()
	r.states = append(r.states, state{node, up, t})
	r.mu.Unlock()
}

// decodeAll feeds every frame of data to dec.
func decodeAll(dec *wire.Decoder, h wire.Handler, data []byte) error {
	fr := wire.NewFrameReader(bytes.NewReader(data), 0)
	for {
		typ, payload, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := dec.Decode(typ, payload, h); err != nil {
			return err
		}
	}
}

func sameDesc(a, b *metric.Desc) bool {
	return a.Name == b.Name && a.Help == b.Help && a.Type == b.Type && slices.Equal(a.Labels, b.Labels)
}

// checkTick compares a decoded tick with what was sent, bit for bit.
func checkTick(t *testing.T, got tick, node string, want *metric.Batch) {
	t.Helper()
	if got.node != node || !got.t.Equal(want.Time) {
		t.Fatalf("tick of %s at %v, want %s at %v", got.node, got.t, node, want.Time)
	}
	if len(got.values) != want.Len() {
		t.Fatalf("%s: %d values, want %d", node, len(got.values), want.Len())
	}
	for i, s := range want.Samples() {
		if math.Float64bits(got.values[i]) != math.Float64bits(s.Value) {
			t.Fatalf("%s %v: value %d = %v (%#x), want %v (%#x)", node, want.Time, i,
				got.values[i], math.Float64bits(got.values[i]), s.Value, math.Float64bits(s.Value))
		}
		if !sameDesc(got.descs[i], s.Desc) {
			t.Fatalf("%s: desc %d = %+v, want %+v", node, i, *got.descs[i], *s.Desc)
		}
	}
}

func TestRoundTripSimulated(t *testing.T) {
	sch := simulate.NewSchema(8)
	nodes := []*simulate.Node{simulate.NewNode("cn00001", sch, 1), simulate.NewNode("cn00002", sch, 2)}
	enc := wire.NewEncoder()
	streams := []*wire.Stream{enc.NewStream("cn00001"), enc.NewStream("cn00002")}
	dec := wire.NewDecoder(wire.Limits{}, nil)
	var rec recorder
	t0 := time.Unix(1_763_800_000, 0)
	var b metric.Batch
	buf := []byte("prefix") // appending to a non-empty dst must keep it
	firstDesc := map[string]*metric.Desc{}
	for i := range 300 {
		for k, n := range nodes {
			b.Reset(t0.Add(time.Duration(i) * 100 * time.Millisecond))
			n.Sample(b.Time, 100*time.Millisecond, &b)
			out, err := enc.AppendTick(buf[:6], streams[k], b.Time, b.Descs, b.Values)
			if err != nil {
				t.Fatal(err)
			}
			if string(out[:6]) != "prefix" {
				t.Fatalf("dst prefix overwritten: %q", out[:6])
			}
			buf = out
			rec.ticks = rec.ticks[:0]
			if err := decodeAll(dec, &rec, out[6:]); err != nil {
				t.Fatalf("tick %d node %s: %v", i, n.Name, err)
			}
			if len(rec.ticks) != 1 {
				t.Fatalf("tick %d: %d ticks decoded", i, len(rec.ticks))
			}
			checkTick(t, rec.ticks[0], n.Name, &b)
			// Interned: node_load1 is one pointer for every node and tick.
			for _, d := range rec.ticks[0].descs {
				if d.Name == "node_load1" {
					if p, ok := firstDesc[d.Name]; ok && p != d {
						t.Fatalf("tick %d: node_load1 not interned", i)
					}
					firstDesc[d.Name] = d
				}
			}
		}
	}
	if rec.schemas < 2 {
		t.Errorf("%d schemas decoded, want one per node at least", rec.schemas)
	}
}

func TestRoundTripSpecialValues(t *testing.T) {
	descs := []*metric.Desc{
		metric.NewDesc("a", "a help", metric.Gauge, "k", "1"),
		metric.NewDesc("a", "a help", metric.Gauge, "k", "2"),
		metric.NewDesc("b_total", "", metric.Counter),
		metric.NewDesc("c", "odd \n help \\", metric.Untyped, "x", "", "y", "é"),
	}
	// Rows of values for the four series, tick after tick.
	rows := [][]float64{
		{0, 0, 0, 0},
		{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)},
		{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)},
		{0.1 + 0.2, 1e300, -5e-324, math.MaxFloat64},
		{12.34, 1 << 53, 1<<53 + 2, -(1 << 53)},
		{12.35, 1 << 53, 1e6, 42}, // counter reset on b_total
		{12.345, 0.5, 2e6, 42},
		{12.3456789, 0.52, 3e6, 42},
		{1e-9, 0.52, 4e6, math.Float64frombits(0x7ff8000000000001)}, // NaN payload
		{7, -7, 5e6, math.MaxInt64},
		{8, -8.25, 6.5e6, math.SmallestNonzeroFloat64},
		{9, 123456789.123, 8e6, 1},
	}
	enc := wire.NewEncoder()
	st := enc.NewStream("n1")
	dec := wire.NewDecoder(wire.Limits{}, nil)
	var rec recorder
	var b metric.Batch
	for i, row := range rows {
		b.Reset(time.Unix(int64(i), 500))
		for k, v := range row {
			b.Add(descs[k], v)
		}
		out, err := enc.AppendTick(nil, st, b.Time, b.Descs, b.Values)
		if err != nil {
			t.Fatal(err)
		}
		rec.ticks = rec.ticks[:0]
		if err := decodeAll(dec, &rec, out); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
		checkTick(t, rec.ticks[0], "n1", &b)
	}
}

func TestSchemaChanges(t *testing.T) {
	mk := func(n int) []*metric.Desc {
		var ds []*metric.Desc
		for i := range n {
			ds = append(ds, metric.NewDesc("s", "h", metric.Gauge, "i", string(rune('a'+i))))
		}
		return ds
	}
	all := mk(6)
	seqs := [][]*metric.Desc{
		all[:3],
		all[:3],
		all[:5],                          // series appear
		{all[4], all[0], all[2]},         // disappear and reorder
		{all[4], all[0], all[2], all[5]}, // a new one
		{},                               // nothing
		{all[1], all[1], all[3]},         // the same series twice
		all,
	}
	enc := wire.NewEncoder()
	st := enc.NewStream("n1")
	dec := wire.NewDecoder(wire.Limits{}, nil)
	var rec recorder
	for i, seq := range seqs {
		values := make([]float64, len(seq))
		for k := range values {
			values[k] = float64(i*10 + k)
		}
		if i == 6 {
			enc.Reset() // a new connection: the decoder must get all again
			dec = wire.NewDecoder(wire.Limits{}, nil)
		}
		before := rec.schemas
		out, err := enc.AppendTick(nil, st, time.Unix(int64(i), 0), seq, values)
		if err != nil {
			t.Fatal(err)
		}
		rec.ticks = rec.ticks[:0]
		if err := decodeAll(dec, &rec, out); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		wantSchema := i == 0 || !slices.Equal(seq, seqs[i-1]) || i == 6
		if got := rec.schemas > before; got != wantSchema {
			t.Errorf("step %d: schema sent = %v, want %v", i, got, wantSchema)
		}
		got := rec.ticks[0]
		if !slices.Equal(got.values, values) || len(got.descs) != len(seq) {
			t.Fatalf("step %d: values %v, want %v", i, got.values, values)
		}
		for k := range seq {
			if !sameDesc(got.descs[k], seq[k]) {
				t.Fatalf("step %d: desc %d = %v, want %v", i, k, got.descs[k].Labels, seq[k].Labels)
			}
		}
	}
}

func TestGapAndNodeState(t *testing.T) {
	var out []byte
	out = wire.AppendGap(out, "cn00007", time.Unix(10, 0), time.Unix(20, 0))
	out = wire.AppendNodeState(out, "cn00007", false, time.Unix(21, 5))
	out = wire.AppendNodeState(out, "cn00008", true, time.Unix(22, 0))
	var rec recorder
	if err := decodeAll(wire.NewDecoder(wire.Limits{}, nil), &rec, out); err != nil {
		t.Fatal(err)
	}
	if len(rec.gaps) != 1 || rec.gaps[0] != (gap{"cn00007", time.Unix(10, 0), time.Unix(20, 0)}) {
		t.Errorf("gaps = %v", rec.gaps)
	}
	want := []state{{"cn00007", false, time.Unix(21, 5)}, {"cn00008", true, time.Unix(22, 0)}}
	if len(rec.states) != 2 || rec.states[0] != want[0] || rec.states[1] != want[1] {
		t.Errorf("states = %v, want %v", rec.states, want)
	}
}

func TestEncodeErrors(t *testing.T) {
	enc := wire.NewEncoder()
	st := enc.NewStream("n")
	d := metric.NewDesc("x", "", metric.Gauge)
	if _, err := enc.AppendTick(nil, st, time.Now(), []*metric.Desc{d}, nil); err == nil {
		t.Error("mismatched lengths accepted")
	}
	if _, err := enc.AppendTick(nil, st, time.Now(), []*metric.Desc{nil}, []float64{1}); err == nil {
		t.Error("nil descriptor accepted")
	}
	big := make([]*metric.Desc, wire.MaxSeries+1)
	if _, err := enc.AppendTick(nil, st, time.Now(), big, make([]float64, len(big))); !errors.Is(err, wire.ErrTooManySeries) {
		t.Errorf("too many series: err = %v", err)
	}
	// After the errors the stream still works.
	out, err := enc.AppendTick(nil, st, time.Unix(1, 0), []*metric.Desc{d}, []float64{3})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	if err := decodeAll(wire.NewDecoder(wire.Limits{}, nil), &rec, out); err != nil || len(rec.ticks) != 1 || rec.ticks[0].values[0] != 3 {
		t.Fatalf("after errors: %v %v", err, rec.ticks)
	}
}

// Nodes with the same series on one connection (an aggregator's children,
// a simulator group) send their descriptors once; later streams copy them.
func TestSharedSchemaCopied(t *testing.T) {
	sch := simulate.NewSchema(16)
	enc := wire.NewEncoder()
	dec := wire.NewDecoder(wire.Limits{}, nil)
	var rec recorder
	t0 := time.Unix(1_763_800_000, 0)
	var nodes []*simulate.Node
	var streams []*wire.Stream
	for i := range 3 {
		name := simulate.NodeName(i + 1)
		nodes = append(nodes, simulate.NewNode(name, sch, uint64(i)))
		streams = append(streams, enc.NewStream(name))
	}
	for round := range 2 {
		var sizes []int
		for tick := range 3 {
			for k, n := range nodes {
				var b metric.Batch
				b.Reset(t0.Add(time.Duration(round*10+tick) * time.Second))
				n.Sample(b.Time, time.Second, &b)
				out, err := enc.AppendTick(nil, streams[k], b.Time, b.Descs, b.Values)
				if err != nil {
					t.Fatal(err)
				}
				if tick == 0 {
					sizes = append(sizes, len(out))
				}
				rec.ticks = rec.ticks[:0]
				if err := decodeAll(dec, &rec, out); err != nil {
					t.Fatalf("round %d tick %d %s: %v", round, tick, n.Name, err)
				}
				checkTick(t, rec.ticks[0], n.Name, &b)
			}
		}
		// First ticks: full schema for the first node only.
		if sizes[1] > sizes[0]/5 || sizes[2] > sizes[0]/5 {
			t.Errorf("round %d: first-tick frames %v bytes: later nodes did not copy the schema", round, sizes)
		}
		if testing.Verbose() {
			t.Logf("round %d: first-tick frames %v bytes", round, sizes)
		}
		enc.Reset() // reconnect: everything again on a fresh decoder
		dec = wire.NewDecoder(wire.Limits{}, nil)
	}
}
