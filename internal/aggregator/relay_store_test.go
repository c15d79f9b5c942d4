package aggregator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/ingest"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// TestRelayedSchemaChangesStored: children whose series change on every
// tick (processes come and go, so tables grow and are compacted; a series
// appears and goes; the order is reversed for a while; nodes share
// descriptors, so schemas copy entries between streams) stream through
// two relaying aggregators into the server's ingest and store. Without a
// keyframe in the whole run, only relayed schemas keep the top's tables in
// step; the stored series are exactly the children's, and neither
// aggregator encodes or loses a child's tick.
func TestRelayedSchemaChangesStored(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := ingest.New(st, time.Second, quiet())
	go h.Run(ctx)
	tln := listen(t)
	var topStats wire.ServerStats
	go wire.Serve(ctx, tln, wire.ServerOptions{Log: quiet(), Stats: &topStats}, h)
	a2 := startAgg(t, ctx, "a2", tln.Addr().String(), 0)
	a1 := startAgg(t, ctx, "a1", a2.Addr(), 0)
	child, err := wire.NewClient(wire.ClientOptions{Addrs: []string{a1.Addr()}, Name: "rack", Log: quiet(), KeyframeEvery: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	go child.Run(ctx)

	var stable []*metric.Desc
	for c := range 4 {
		stable = append(stable, metric.NewDesc("cpu_seconds", "", metric.Counter, "cpu", strconv.Itoa(c)))
	}
	stable = append(stable, metric.NewDesc("mem_bytes", "", metric.Gauge), metric.NewDesc("load1", "", metric.Gauge))
	extra := metric.NewDesc("extra_ratio", "", metric.Gauge)
	procs := map[int]*metric.Desc{} // shared by the nodes: schemas copy them
	proc := func(pid int) *metric.Desc {
		if procs[pid] == nil {
			procs[pid] = metric.NewDesc("proc_cpu", "", metric.Counter, "pid", strconv.Itoa(pid))
		}
		return procs[pid]
	}
	nodes := []string{"cn1", "cn2", "cn3"}
	streams := make([]*wire.ClientStream, len(nodes))
	for i, n := range nodes {
		streams[i] = child.NewStream(n)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const ticks = 60
	base := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	want := map[string]map[int64]float64{} // node and series → ms → value
	key := func(node string, d *metric.Desc) string { return node + " " + fmt.Sprint(d.Name, d.Labels) }
	for i := range ticks {
		ts := base.Add(time.Duration(i) * time.Second)
		for k, node := range nodes {
			d := append([]*metric.Desc(nil), stable...)
			if i >= 20 && i < 30 {
				slicesReverse(d)
			}
			if k == 1 && i >= 10 && i < 40 {
				d = append(d, extra)
			}
			// Four processes, two of them new each tick (pids overlap
			// between nodes).
			for p := range 4 {
				d = append(d, proc(2*i+p+k))
			}
			v := make([]float64, len(d))
			for j, ds := range d {
				switch ds.Name {
				case "cpu_seconds", "proc_cpu":
					v[j] = float64(100*i+7*j+k) / 100
				case "mem_bytes":
					v[j] = float64(1<<30 + rng.IntN(1<<20)*4096)
				case "load1":
					v[j] = float64(rng.IntN(500)) / 100
				default:
					v[j] = rng.Float64()
				}
				kk := key(node, ds)
				if want[kk] == nil {
					want[kk] = map[int64]float64{}
				}
				want[kk][ts.UnixMilli()] = v[j]
			}
			child.Tick(streams[k], ts, d, v)
		}
		if i%10 == 9 {
			time.Sleep(5 * time.Millisecond) // spread the load a little
		}
	}
	total := 0
	for _, m := range want {
		total += len(m)
	}
	var got map[string]map[int64]float64
	waitFor(t, "every sample stored", 15*time.Second, func() bool {
		got = storedSamples(t, st)
		n := 0
		for _, m := range got {
			n += len(m)
		}
		return n >= total
	})
	for k, w := range want {
		g := got[k]
		if len(g) != len(w) {
			t.Errorf("%s: %d samples stored, want %d", k, len(g), len(w))
			continue
		}
		for ts, v := range w {
			if gv, ok := g[ts]; !ok || math.Float64bits(gv) != math.Float64bits(v) {
				t.Errorf("%s at %d: stored %v (present %v), want %v", k, ts, gv, ok, v)
			}
		}
	}
	for k := range got {
		if want[k] == nil {
			t.Errorf("stored series %s was never sent", k)
		}
	}
	if n := topStats.ProtocolErrors.Load() + a1.wstats.ProtocolErrors.Load() + a2.wstats.ProtocolErrors.Load(); n != 0 {
		t.Errorf("%d protocol errors", n)
	}
	for _, a := range []*Aggregator{a1, a2} {
		r, e, l := testutil.ToFloat64(a.lag.relayed), testutil.ToFloat64(a.lag.encoded), testutil.ToFloat64(a.lag.lost)
		if r < ticks*float64(len(nodes)) || e != 0 || l != 0 {
			t.Errorf("%s: %v ticks relayed, %v encoded, %v lost; want all %d relayed", a.cfg.Name, r, e, l, ticks*len(nodes))
		}
	}
}

func slicesReverse(d []*metric.Desc) {
	for i, j := 0, len(d)-1; i < j; i, j = i+1, j-1 {
		d[i], d[j] = d[j], d[i]
	}
}

// storedSamples reads the simulated nodes' series from st, keyed as the
// test keys what it sent.
func storedSamples(t *testing.T, st *store.Store) map[string]map[int64]float64 {
	t.Helper()
	q, err := st.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchRegexp, store.NodeLabel, "cn.*"),
		labels.MustNewMatcher(labels.MatchNotEqual, labels.MetricName, "up"))
	out := map[string]map[int64]float64{}
	for set.Next() {
		s := set.At()
		ls := s.Labels()
		var lbl []string
		ls.Range(func(l labels.Label) {
			if l.Name != labels.MetricName && l.Name != store.NodeLabel {
				lbl = append(lbl, l.Name, l.Value)
			}
		})
		d := metric.NewDesc(ls.Get(labels.MetricName), "", metric.Gauge, lbl...)
		k := ls.Get(store.NodeLabel) + " " + fmt.Sprint(d.Name, d.Labels)
		m := map[int64]float64{}
		it := s.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			m[ts] = v
		}
		out[k] = m
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
