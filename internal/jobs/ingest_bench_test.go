package jobs_test

import (
	"fmt"
	"log/slog"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/ingest"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/store"
)

// BenchmarkIngestJobs is the server's ingest cost per node tick with and
// without jobs: the simulated cluster without a scheduler and no tap,
// against the same cluster with the simulated scheduler (about a tenth as
// many jobs as nodes, three quarters of the nodes busy, the jobs plugin's
// series on them) and the job index's tap, as the server runs. Ticks are
// sampled beforehand so only the handler, the store and the tap are timed;
// run it with -benchtime 100000x (200 rounds of 500 nodes), as beyond that
// the rounds repeat, and jobs that ended would start again.
// The budget: jobs add at most 10 % to ingest CPU.
func BenchmarkIngestJobs(b *testing.B) {
	const nodes, rounds = 500, 200
	for _, withJobs := range []bool{false, true} {
		b.Run(fmt.Sprintf("jobs=%v", withJobs), func(b *testing.B) {
			type tick struct {
				descs  []*metric.Desc
				values []float64
			}
			sched, err := simulate.NewScheduler(simulate.SchedulerOptions{Nodes: nodes, CPUs: 16, Interval: time.Second, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			sch := simulate.NewSchema(16)
			ns := make([]*simulate.Node, nodes)
			names := make([]string, nodes)
			for i := range ns {
				names[i] = simulate.NodeName(i + 1)
				ns[i] = simulate.NewNode(names[i], sch, uint64(i+1))
				if withJobs {
					ns[i].SetScheduler(sched, i)
				}
			}
			t0 := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
			// Ten minutes of warm-up so the scheduler has its jobs placed.
			var batch metric.Batch
			for k := range 600 {
				for i := range ns {
					batch.Reset(t0.Add(time.Duration(k) * time.Second))
					ns[i].Sample(batch.Time, time.Second, &batch)
				}
			}
			ticks := make([][]tick, rounds)
			values := 0
			for r := range ticks {
				ticks[r] = make([]tick, nodes)
				for i := range ns {
					batch.Reset(t0.Add(time.Duration(600+r) * time.Second))
					ns[i].Sample(batch.Time, time.Second, &batch)
					descs := batch.Descs
					if r > 0 && slices.Equal(ticks[r-1][i].descs, descs) {
						descs = ticks[r-1][i].descs // most ticks keep the schema: share it
					} else {
						descs = slices.Clone(descs)
					}
					ticks[r][i] = tick{descs, slices.Clone(batch.Values)}
					values += batch.Len()
				}
			}
			st, err := store.Open(store.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			o := ingest.Options{Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
			if withJobs {
				m, err := jobs.New(jobs.Options{Dir: b.TempDir(), Interval: time.Second, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				o.Tap = m
			}
			h := ingest.NewWithOptions(st, o)
			i, r, round := 0, 0, 0
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				tk := ticks[r][i]
				// Later rounds replay the sampled ones a step later each.
				h.Tick(names[i], t0.Add(time.Duration(600+round)*time.Second), tk.descs, tk.values)
				if i++; i == nodes {
					i, r, round = 0, (r+1)%rounds, round+1
				}
			}
			// CPU time resolves the two sides on a busy machine better than
			// wall time (other work's waits are not counted).
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(values)/float64(rounds*nodes), "values/tick")
			if e := h.Stats().Errors.Load(); e != 0 {
				b.Fatalf("%d errors", e)
			}
		})
	}
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
