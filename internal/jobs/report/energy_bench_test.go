package report

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

// BenchmarkReportEnergy times Build for a 64-node, hour-long job sampled
// every 10 s, from a store with the jobs plugin's series only and from one
// that also holds each node's RAPL and CPU series: the energy section's cost.
func BenchmarkReportEnergy(b *testing.B) {
	for _, power := range []bool{false, true} {
		name := "jobs_only"
		if power {
			name = "with_rapl"
		}
		b.Run(name, func(b *testing.B) {
			st, q := newStore(b)
			nodes := nodeNames(64)
			loads := make([]nodeLoad, len(nodes))
			for k := range loads {
				loads[k] = func(int) (float64, float64, float64, float64) { return 12, 2 << 30, 0, 0 }
			}
			start := time.Now().Add(-70 * time.Minute).Truncate(time.Minute)
			synthJob(b, st, "8", nodes, loads, 16, 0, start, time.Hour, 10*time.Second, 0, 0)
			if power {
				for _, n := range nodes {
					nodePower(b, st, n, 250, 30, 0, 32, start, time.Hour, 10*time.Second)
				}
			}
			job := jobs.Job{ID: "8", Nodes: nodes, CPUs: 64 * 16, Start: start, End: start.Add(time.Hour), State: jobs.StateCompleted}
			b.ReportAllocs()
			for b.Loop() {
				r, err := Build(context.Background(), q, job, start.Add(2*time.Hour))
				if err != nil || (r.Energy != nil) != power {
					b.Fatalf("err %v, energy %v", err, r.Energy)
				}
			}
		})
	}
}
