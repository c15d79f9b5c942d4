package report

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

// BenchmarkReport times Build over a store holding one job sampled at 1 Hz
// (building the store is not timed): 100 nodes for 24 hours and 1,000
// nodes for 2.4 hours hold as many samples; 1,000 nodes for 24 hours runs
// with VIGIL_BENCH_FULL=1 only (ten times the data, minutes to build).
func BenchmarkReport(b *testing.B) {
	for _, c := range []struct {
		nodes int
		dur   time.Duration
	}{
		{100, 24 * time.Hour},
		{1000, 144 * time.Minute},
	} {
		b.Run(fmt.Sprintf("nodes=%d/hours=%.1f", c.nodes, c.dur.Hours()), func(b *testing.B) {
			benchReport(b, c.nodes, c.dur)
		})
	}
}

func benchReport(b *testing.B, nodes int, dur time.Duration) {
	st, q := newStore(b)
	names := nodeNames(nodes)
	loads := make([]nodeLoad, nodes)
	for k := range loads {
		loads[k] = func(i int) (float64, float64, float64, float64) {
			cores := 12 + math.Sin(float64(i)/60+float64(k))
			if k == 7 && i > 3600 {
				cores = 5
			}
			return cores, float64(2<<30 + (i%600)*1<<20), 20 << 20, 5 << 20
		}
	}
	// Whole minutes ago, so the job lies within the store's bounds.
	start := time.Now().Add(-dur - 10*time.Minute).Truncate(time.Minute)
	built := time.Now()
	synthJob(b, st, "555", names, loads, 16, 64<<30, start, dur, time.Second, 0)
	b.Logf("stored %d node-seconds in %v", nodes*int(dur/time.Second), time.Since(built).Round(time.Second))
	job := jobs.Job{ID: "555", Nodes: names, CPUs: 16 * nodes, MemBytes: int64(nodes) * 64 << 30,
		Start: start, End: start.Add(dur), State: jobs.Completed}
	b.ResetTimer()
	for b.Loop() {
		r, err := Build(context.Background(), q, job, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Summary.PerNode) != nodes || len(r.Stragglers) == 0 {
			b.Fatalf("report has %d nodes, stragglers %+v", len(r.Summary.PerNode), r.Stragglers)
		}
	}
}
