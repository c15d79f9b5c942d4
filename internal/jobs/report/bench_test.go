package report

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
)

// BenchmarkReport times Build over a store holding one job sampled at 1 Hz
// (building and rolling up the store is not timed): 100 nodes for 24 hours
// and 1,000 nodes for 2.4 hours hold as many samples, a tenth of a
// 1,000-node day at 1 Hz, which takes too long to build here.
func BenchmarkReport(b *testing.B) {
	for _, c := range []struct {
		nodes          int
		dur            time.Duration
		interval, tail time.Duration
		name           string
	}{
		{100, 24 * time.Hour, time.Second, 0, ""},
		{1000, 144 * time.Minute, time.Second, 0, ""},
		// A day of a thousand nodes: what the rollups hold of it does not
		// depend on the raw interval, so the raw samples are every 10 s
		// but the last 20 minutes, which the report reads raw, at 1 Hz.
		{1000, 24 * time.Hour, 10 * time.Second, 20 * time.Minute, "/tail1Hz"},
	} {
		b.Run(fmt.Sprintf("nodes=%d/hours=%.1f%s", c.nodes, c.dur.Hours(), c.name), func(b *testing.B) {
			benchReport(b, c.nodes, c.dur, c.interval, c.tail)
		})
	}
}

func benchReport(b *testing.B, nodes int, dur, interval, tail time.Duration) {
	st, _ := newStore(b)
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
	synthJob(b, st, "555", names, loads, 16, 64<<30, start, dur, interval, tail, 0)
	b.Logf("stored %v of %d nodes in %v", dur, nodes, time.Since(built).Round(time.Second))
	ru, err := store.OpenRollup(st, store.RollupOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ru.Close() })
	built = time.Now()
	if _, err := ru.Step(context.Background(), time.Now()); err != nil {
		b.Fatal(err)
	}
	b.Logf("rolled up in %v", time.Since(built).Round(time.Second))
	api := query.New(ru.Queryable(), query.Options{})
	job := jobs.Job{ID: "555", Nodes: names, CPUs: 16 * nodes, MemBytes: int64(nodes) * 64 << 30,
		Start: start, End: start.Add(dur), State: jobs.StateCompleted}
	// Interleaved, so both see the same machine: raw samples only, and
	// the server's way (rollups up to the watermark, raw after it).
	for _, c := range []struct {
		name string
		q    Querier
	}{
		{"raw", APIQuerier{API: api}},
		{"rollups", APIQuerier{API: api, Watermark: ru.Watermark}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				r, err := Build(context.Background(), c.q, job, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if len(r.Summary.PerNode) != nodes || len(r.Stragglers) == 0 {
					b.Fatalf("report has %d nodes, stragglers %+v", len(r.Summary.PerNode), r.Stragglers)
				}
			}
		})
	}
}

// BenchmarkReportIO times Build for a 64-node hour-long job sampled every
// 10 s, without and with the appio plugin's series (2 file systems, 52
// series per node each): the cost of the application I/O section.
func BenchmarkReportIO(b *testing.B) {
	nodes := nodeNames(64)
	loads := make([]nodeLoad, len(nodes))
	for k := range loads {
		loads[k] = func(i int) (float64, float64, float64, float64) { return 12, 2 << 30, 20 << 20, 5 << 20 }
	}
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Minute)
	job := jobs.Job{ID: "556", Nodes: nodes, CPUs: 16 * len(nodes), Start: start, End: start.Add(time.Hour), State: jobs.StateCompleted}
	io := []ioLoad{
		{mp: "/scratch", fstype: "lustre", writes: 200, writeSize: 512, opens: 2, stats: 20, writeS: 0.03, metaS: 0.05, sequential: 200},
		{mp: "/home", fstype: "nfs", reads: 10, readSize: 1 << 20, opens: 1, readS: 0.02, sequential: 8, random: 2},
	}
	qs := map[string]Querier{}
	for _, name := range []string{"jobonly", "appio"} {
		st, q := newStore(b)
		synthJob(b, st, job.ID, nodes, loads, 16, 64<<30, start, time.Hour, 10*time.Second, 0, 0)
		if name == "appio" {
			synthAppIO(b, st, job.ID, nodes, io, start, time.Hour, 10*time.Second)
		}
		qs[name] = q
	}
	for _, name := range []string{"jobonly", "appio"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				r, err := Build(context.Background(), qs[name], job, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				if (r.IO != nil) != (name == "appio") {
					b.Fatalf("io section %v", r.IO != nil)
				}
			}
		})
	}
}
