package aggregator

import (
	"context"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// exactTop records every value of every tick bit for bit.
type exactTop struct {
	wire.NopHandler
	mu    sync.Mutex
	ticks map[string]map[int64]map[string]uint64 // node → time → series → bits
}

func (h *exactTop) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(node) < 2 || node[:2] != "cn" {
		return // the aggregators' own health
	}
	m := map[string]uint64{}
	for i, d := range descs {
		m[d.Name] = math.Float64bits(values[i])
	}
	if h.ticks[node] == nil {
		h.ticks[node] = map[int64]map[string]uint64{}
	}
	h.ticks[node][t.UnixNano()] = m
}

func (h *exactTop) has(node string, t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.ticks[node][t.UnixNano()]
	return ok
}

func startAgg(t *testing.T, ctx context.Context, name, upstream string, buffer int) *Aggregator {
	t.Helper()
	a, err := New(Config{Name: name, Listen: "127.0.0.1:0", Upstream: []string{upstream}, Interval: time.Second, Log: quiet(), BufferBytes: buffer})
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	waitFor(t, name+" listening", 5*time.Second, func() bool { return a.Addr() != "" })
	return a
}

// TestRelayExact: through two aggregators that pass children's schema and
// value frames on as they are, every value arrives bit for bit: counters,
// decimals, noise, NaN and infinities, across schema changes, keyframes,
// and the top restarting (a new upstream connection, so the relay starts
// over at each child's next keyframe).
func TestRelayExact(t *testing.T) { relayChain(t, false) }

// TestRelayExactAfterDrops: the top is away at first and the second
// aggregator's buffer holds a few ticks, so it drops queued ticks, relayed
// ones among them; the values that arrive are still exact (a stream whose
// relayed tick was dropped waits for its child's next keyframe).
func TestRelayExactAfterDrops(t *testing.T) { relayChain(t, true) }

func relayChain(t *testing.T, drops bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	top := &exactTop{ticks: map[string]map[int64]map[string]uint64{}}
	tln := listen(t)
	topAddr := tln.Addr().String()
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	var topStats wire.ServerStats
	buffer := 0
	if drops {
		buffer = 256 // the top accepts from tick 30 on; a2 queues until then
	} else {
		go wire.Serve(tctx, tln, wire.ServerOptions{Log: quiet(), Stats: &topStats}, top)
	}

	a2 := startAgg(t, ctx, "a2", topAddr, buffer)
	a1 := startAgg(t, ctx, "a1", a2.Addr(), 0)
	child, err := wire.NewClient(wire.ClientOptions{Addrs: []string{a1.Addr()}, Name: "rack", Log: quiet(), KeyframeEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	go child.Run(ctx)

	descs := []*metric.Desc{
		metric.NewDesc("cpu_seconds", "", metric.Counter),
		metric.NewDesc("mem_bytes", "", metric.Gauge),
		metric.NewDesc("load1", "", metric.Gauge),
		metric.NewDesc("ratio", "", metric.Gauge),
		metric.NewDesc("odd", "", metric.Gauge),
	}
	extra := metric.NewDesc("new_series", "", metric.Gauge)
	nodes := []string{"cn1", "cn2"}
	streams := []*wire.ClientStream{child.NewStream(nodes[0]), child.NewStream(nodes[1])}
	rng := rand.New(rand.NewPCG(1, 2))
	const iv = 20 * time.Millisecond
	const ticks = 80
	base := time.Now().Truncate(iv)
	sent := map[string]map[int64]map[string]uint64{"cn1": {}, "cn2": {}}
	var last time.Time
	for i := range ticks {
		if i == 30 && drops {
			go wire.Serve(tctx, tln, wire.ServerOptions{Log: quiet(), Stats: &topStats}, top)
		}
		if i == 50 { // the top restarts: a2 connects again and starts over
			tcancel()
			waitFor(t, "a2 disconnected", 5*time.Second, func() bool { return !a2.client.Stats().Connected.Load() })
			ln, err := net.Listen("tcp", topAddr)
			if err != nil {
				t.Fatal(err)
			}
			go wire.Serve(ctx, ln, wire.ServerOptions{Log: quiet(), Stats: &topStats}, top)
		}
		ts := base.Add(time.Duration(i) * iv)
		for n, node := range nodes {
			d := descs
			switch {
			case i >= 20 && i < 35: // a series comes and goes: schema changes
				d = append(append([]*metric.Desc(nil), descs...), extra)
			case i >= 35 && i < 42:
				d = descs[1:]
			}
			v := make([]float64, len(d))
			m := map[string]uint64{}
			for j, ds := range d {
				switch ds.Name {
				case "cpu_seconds":
					v[j] = float64(1000+37*i+n) / 100
				case "mem_bytes":
					v[j] = float64(1<<30 + rng.IntN(1<<20)*4096)
				case "load1":
					v[j] = float64(rng.IntN(500)) / 100
				case "ratio":
					v[j] = rng.Float64()
				case "odd":
					v[j] = []float64{math.NaN(), math.Inf(1), math.Copysign(0, -1), 1e300}[i%4]
				default:
					v[j] = float64(i)
				}
				m[ds.Name] = math.Float64bits(v[j])
			}
			sent[node][ts.UnixNano()] = m
			child.Tick(streams[n], ts, d, v)
		}
		last = ts
		time.Sleep(iv)
	}
	waitFor(t, "the last tick at the top", 10*time.Second, func() bool { return top.has("cn1", last) && top.has("cn2", last) })

	top.mu.Lock()
	defer top.mu.Unlock()
	arrived := 0
	for node, byT := range top.ticks {
		for ts, got := range byT {
			want, ok := sent[node][ts]
			if !ok {
				t.Errorf("%s: tick at %v was never sent", node, time.Unix(0, ts))
				continue
			}
			arrived++
			if len(got) != len(want) {
				t.Errorf("%s at %v: series %v, want %v", node, time.Unix(0, ts), got, want)
				continue
			}
			for name, bits := range want {
				if got[name] != bits {
					t.Errorf("%s at %v: %s = %v, want %v", node, time.Unix(0, ts), name, math.Float64frombits(got[name]), math.Float64frombits(bits))
				}
			}
		}
	}
	if min := ticks; drops && arrived < ticks/2 || !drops && arrived < min { // of 2 × ticks; the restart may lose a few
		t.Errorf("only %d of %d ticks arrived", arrived, 2*ticks)
	}
	if d := a2.client.Stats().Dropped.Load(); drops && d == 0 {
		t.Errorf("a2 dropped no tick; the test wants drops")
	}
	// A relayed frame the receiver cannot decode closes the connection.
	if n := topStats.ProtocolErrors.Load() + a1.wstats.ProtocolErrors.Load() + a2.wstats.ProtocolErrors.Load(); n != 0 {
		t.Errorf("%d protocol errors", n)
	}
	for _, a := range []*Aggregator{a1, a2} {
		r, e, l := testutil.ToFloat64(a.lag.relayed), testutil.ToFloat64(a.lag.encoded), testutil.ToFloat64(a.lag.lost)
		t.Logf("%s: %v ticks relayed, %v encoded, %v lost", a.cfg.Name, r, e, l)
		if r < ticks/2 || e != 0 {
			t.Errorf("%s: %v ticks relayed, %v encoded; want most relayed, none encoded", a.cfg.Name, r, e)
		}
	}
	// a1's upstream never went away: schema changes and all went through.
	if r, l := testutil.ToFloat64(a1.lag.relayed), testutil.ToFloat64(a1.lag.lost); r != 2*ticks || l != 0 {
		t.Errorf("a1: %v ticks relayed, %v lost; want %d relayed", r, l, 2*ticks)
	}
}

// orderTop records each tick's values in order.
type orderTop struct {
	wire.NopHandler
	mu    sync.Mutex
	ticks map[int64][]uint64
}

func (h *orderTop) Tick(node string, t time.Time, _ []*metric.Desc, values []float64) {
	if node != "cn1" {
		return
	}
	v := make([]uint64, len(values))
	for i, x := range values {
		v[i] = math.Float64bits(x)
	}
	h.mu.Lock()
	h.ticks[t.UnixNano()] = v
	h.mu.Unlock()
}

// TestRelayDuplicateSeries: a child that sends the same series twice as
// two table entries (each with its own value state) has them interned to
// one descriptor here; the relayed table keeps both entries, so every
// value still arrives exactly.
func TestRelayDuplicateSeries(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	top := &orderTop{ticks: map[int64][]uint64{}}
	tln := listen(t)
	var topStats wire.ServerStats
	go wire.Serve(ctx, tln, wire.ServerOptions{Log: quiet(), Stats: &topStats}, top)
	a1 := startAgg(t, ctx, "a1", tln.Addr().String(), 0)
	child, err := wire.NewClient(wire.ClientOptions{Addrs: []string{a1.Addr()}, Name: "rack", Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go child.Run(ctx)
	// Same content, two pointers: two entries at the child.
	descs := []*metric.Desc{metric.NewDesc("dup", "", metric.Gauge), metric.NewDesc("dup", "", metric.Gauge)}
	cs := child.NewStream("cn1")
	base := time.Now().Truncate(time.Millisecond)
	want := map[int64][]uint64{}
	var last time.Time
	for i := range 20 {
		ts := base.Add(time.Duration(i) * 10 * time.Millisecond)
		v := []float64{float64(i), 1000 - 3.5*float64(i*i)}
		want[ts.UnixNano()] = []uint64{math.Float64bits(v[0]), math.Float64bits(v[1])}
		child.Tick(cs, ts, descs, v)
		last = ts
	}
	waitFor(t, "the last tick at the top", 10*time.Second, func() bool {
		top.mu.Lock()
		defer top.mu.Unlock()
		_, ok := top.ticks[last.UnixNano()]
		return ok
	})
	top.mu.Lock()
	defer top.mu.Unlock()
	for ts, got := range top.ticks {
		if w := want[ts]; len(got) != 2 || got[0] != w[0] || got[1] != w[1] {
			t.Errorf("tick at %v: %v, want %v", time.Unix(0, ts), got, w)
		}
	}
	if n := topStats.ProtocolErrors.Load(); n != 0 {
		t.Errorf("%d protocol errors", n)
	}
	if r, e := testutil.ToFloat64(a1.lag.relayed), testutil.ToFloat64(a1.lag.encoded); r != 20 || e != 0 {
		t.Errorf("%v ticks relayed, %v encoded; want all 20 relayed", r, e)
	}
}

// TestRelayAsksForKeyframe: a child that never sends keyframes on its own
// streams through two relaying aggregators; the top restarts, so the
// second aggregator's upstream state is gone. It asks the first for
// keyframes, which asks the child, so relaying resumes within a few ticks
// (without the requests no tick would pass again) and the values that
// arrive are exact. Keyed, the requests carry tags like every frame.
func TestRelayAsksForKeyframe(t *testing.T) {
	t.Run("plain", func(t *testing.T) { asksForKeyframe(t, nil) })
	t.Run("keyed", func(t *testing.T) { asksForKeyframe(t, []byte("0123456789abcdef-relay-key")) })
}

func asksForKeyframe(t *testing.T, key []byte) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	top := &exactTop{ticks: map[string]map[int64]map[string]uint64{}}
	tln := listen(t)
	topAddr := tln.Addr().String()
	tctx, tcancel := context.WithCancel(ctx)
	defer tcancel()
	var topStats wire.ServerStats
	go wire.Serve(tctx, tln, wire.ServerOptions{Log: quiet(), Key: key, Stats: &topStats}, top)
	agg := func(name, upstream string) *Aggregator {
		a, err := New(Config{Name: name, Listen: "127.0.0.1:0", Upstream: []string{upstream}, Interval: time.Second, Log: quiet(), Key: key})
		if err != nil {
			t.Fatal(err)
		}
		go a.Run(ctx)
		waitFor(t, name+" listening", 5*time.Second, func() bool { return a.Addr() != "" })
		return a
	}
	a2 := agg("a2", topAddr)
	a1 := agg("a1", a2.Addr())
	child, streams := rackChild(t, ctx, a1.Addr(), key)
	descs := []*metric.Desc{metric.NewDesc("c", "", metric.Counter), metric.NewDesc("r", "", metric.Gauge)}
	nodes := []string{"cn1", "cn2"}
	const iv = 20 * time.Millisecond
	base := time.Now().Truncate(iv)
	sent := map[string]map[int64][2]uint64{"cn1": {}, "cn2": {}}
	const ticks, restart = 60, 20
	var last time.Time
	for i := range ticks {
		if i == restart {
			tcancel()
			waitFor(t, "a2 disconnected", 5*time.Second, func() bool { return !a2.client.Stats().Connected.Load() })
			ln, err := net.Listen("tcp", topAddr)
			if err != nil {
				t.Fatal(err)
			}
			go wire.Serve(ctx, ln, wire.ServerOptions{Log: quiet(), Key: key, Stats: &topStats}, top)
			waitFor(t, "a2 connected again", 5*time.Second, func() bool { return a2.client.Stats().Connected.Load() })
		}
		ts := base.Add(time.Duration(i) * iv)
		for k, node := range nodes {
			v := []float64{float64(100*i+k) / 100, float64(i%7) / 3}
			sent[node][ts.UnixNano()] = [2]uint64{math.Float64bits(v[0]), math.Float64bits(v[1])}
			child.Tick(streams[k], ts, descs, v)
		}
		last = ts
		time.Sleep(iv)
	}
	waitFor(t, "the last tick at the top", 10*time.Second, func() bool { return top.has("cn1", last) && top.has("cn2", last) })
	top.mu.Lock()
	defer top.mu.Unlock()
	for _, node := range nodes {
		after := 0
		for ts, got := range top.ticks[node] {
			w := sent[node][ts]
			if got["c"] != w[0] || got["r"] != w[1] {
				t.Errorf("%s at %v: %v, want %v", node, time.Unix(0, ts), got, w)
			}
			if ts >= base.Add(restart*iv).UnixNano() {
				after++
			}
		}
		// A few ticks go while the requests travel down and the keyframe up.
		if after < ticks-restart-8 {
			t.Errorf("%s: %d of the %d ticks after the restart arrived", node, after, ticks-restart)
		}
	}
	if e := testutil.ToFloat64(a2.lag.encoded) + testutil.ToFloat64(a1.lag.encoded); e != 0 {
		t.Errorf("%v ticks encoded again", e)
	}
	if n := topStats.ProtocolErrors.Load() + topStats.AuthFailures.Load() + a1.wstats.ProtocolErrors.Load() + a2.wstats.ProtocolErrors.Load(); n != 0 {
		t.Errorf("%d protocol errors or authentication failures", n)
	}
	if n := child.Stats().Connects.Load() + a1.client.Stats().Connects.Load(); n != 2 {
		t.Errorf("child and a1 connected %d times; want once each (a request must not break a link)", n)
	}
}

// rackChild runs a client named rack to addr with streams of cn1 and cn2,
// sending keyframes only when asked.
func rackChild(t *testing.T, ctx context.Context, addr string, key []byte) (*wire.Client, []*wire.ClientStream) {
	t.Helper()
	child, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "rack", Log: quiet(), KeyframeEvery: 1 << 20, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	go child.Run(ctx)
	return child, []*wire.ClientStream{child.NewStream("cn1"), child.NewStream("cn2")}
}
