package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

var load1 = metric.NewDesc("node_load1", "1m load average.", metric.Gauge)

func openStore(t *testing.T, reg prometheus.Registerer) *store.Store {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// samples counts the stored samples of name{node=node}, newest value last.
func samples(t *testing.T, st *store.Store, name, node string) (n int, last float64) {
	t.Helper()
	q, err := st.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), false, nil,
		labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name), labels.MustNewMatcher(labels.MatchEqual, store.NodeLabel, node))
	for set.Next() {
		it := set.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			_, last = it.At()
			n++
		}
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	return n, last
}

// gathered returns the value of the series of name with the given labels.
func gathered(t *testing.T, g prometheus.Gatherer, name string, lbl map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := lbl[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue(), true
			}
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// One node two hours fast and one an hour (and a bit) slow among normal
// nodes: the normal nodes are stored, the other two are flagged with their
// offsets and their refused samples counted.
func TestClockSkewJudgedPerNode(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := openStore(t, reg)
	h := NewWithOptions(st, Options{Interval: 100 * time.Millisecond, Offsets: st, Registerer: reg, Logger: quiet()})
	offsets := map[string]time.Duration{"cn01": 0, "cn02": 0, "cn03": 0, "fast": 2 * time.Hour, "slow": -time.Hour - 2*time.Second}
	descs := []*metric.Desc{load1}
	start := time.Now().Add(-50 * time.Millisecond)
	for i := range 5 {
		now := start.Add(time.Duration(i) * 10 * time.Millisecond)
		for _, n := range []string{"cn01", "cn02", "cn03", "fast", "slow"} {
			h.Tick(n, now.Add(offsets[n]), descs, []float64{float64(i)})
		}
	}
	h.judgeClocks(time.Now())

	for _, n := range []string{"cn01", "cn02", "cn03"} {
		if got, _ := samples(t, st, "node_load1", n); got != 5 {
			t.Errorf("%s: %d samples stored, want 5", n, got)
		}
		if got, up := samples(t, st, "up", n); got != 5 || up != 1 {
			t.Errorf("%s: %d up samples, last %v; want 5, 1", n, got, up)
		}
		if _, skew := samples(t, st, skewMetric, n); skew != 0 {
			t.Errorf("%s flagged clock skew", n)
		}
	}
	skewed := h.ClockSkew()
	if len(skewed) != 2 {
		t.Errorf("clock skew %v, want fast and slow", skewed)
	}
	for n, reason := range map[string]string{"fast": "too_far_in_future", "slow": "out_of_bounds"} {
		off, want := skewed[n], offsets[n]
		if d := off - want; d < -time.Second || d > time.Second {
			t.Errorf("%s: offset %s, want about %s", n, off, want)
		}
		if got, _ := samples(t, st, "node_load1", n); got != 0 {
			t.Errorf("%s: %d samples stored at its wrong time, want 0", n, got)
		}
		if v, ok := gathered(t, reg, "vigil_node_clock_offset_seconds", map[string]string{"node": n}); !ok || math.Abs(v-want.Seconds()) > 1 {
			t.Errorf("%s: vigil_node_clock_offset_seconds = %v (found %v), want about %v", n, v, ok, want.Seconds())
		}
		if v, _ := gathered(t, reg, "vigil_samples_rejected_total", map[string]string{"reason": reason, "sender": n}); v != 10 {
			t.Errorf("%s: vigil_samples_rejected_total{reason=%q} = %v, want 10 (5 ticks of a value and up)", n, reason, v)
		}
		if got, skew := samples(t, st, skewMetric, n); got != 1 || skew != 1 {
			t.Errorf("%s: stored %s: %d samples, last %v; want 1", n, skewMetric, got, skew)
		}
		if _, off := samples(t, st, offsetMetric, n); math.Abs(off-want.Seconds()) > 1 {
			t.Errorf("%s: stored %s = %v, want about %v", n, offsetMetric, off, want.Seconds())
		}
	}
	if v, _ := gathered(t, reg, "vigil_ingest_clock_skew_nodes", nil); v != 2 {
		t.Errorf("vigil_ingest_clock_skew_nodes = %v, want 2", v)
	}
}

// While a node an hour slow streams its late ticks, 50 nodes that stopped
// are still marked down within the usual 3 intervals.
func TestLaggingNodeDoesNotStopDownDetection(t *testing.T) {
	const interval = 100 * time.Millisecond
	st := openStore(t, nil)
	h := NewWithOptions(st, Options{Interval: interval, Logger: quiet()})
	descs := []*metric.Desc{load1}
	for i := range 50 {
		h.Tick(fmt.Sprintf("cn%02d", i), time.Now(), descs, []float64{1})
	}
	stopped := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() { defer wg.Done(); h.Run(ctx) }()
	go func() {
		defer wg.Done()
		tk := time.NewTicker(interval / 4)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				h.Tick("slow", now.Add(-time.Hour), descs, []float64{1})
			}
		}
	}()
	// 3 silent intervals, then the next sweep; generous slack for a
	// loaded machine, far below "never".
	deadline := stopped.Add(3*interval + 2*time.Second)
	storedDown := func() (n int) {
		for i := range 50 {
			if _, up := samples(t, st, "up", fmt.Sprintf("cn%02d", i)); up == 0 {
				n++
			}
		}
		return n
	}
	for {
		down := storedDown()
		if down == 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 50 stopped nodes stored as up=0 after %s", down, time.Since(stopped))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if el := time.Since(stopped); el > 6*interval {
		t.Logf("all 50 down after %s (interval %s)", el, interval)
	}
}
