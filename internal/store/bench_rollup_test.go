package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/query"
)

// fillRaw writes `series` series of one counter at 1 Hz for `seconds`
// seconds from base, one commit per second.
func fillRaw(b *testing.B, s *Store, series, seconds int) {
	b.Helper()
	lsets := make([]labels.Labels, series)
	refs := make([]storage.SeriesRef, series)
	for i := range lsets {
		lsets[i] = labels.FromStrings(labels.MetricName, "node_context_switches_total", NodeLabel, fmt.Sprintf("cn%05d", i))
	}
	for sec := range seconds {
		app := s.Appender(context.Background())
		ts := base.Add(time.Duration(sec) * time.Second).UnixMilli()
		for i := range lsets {
			ref, err := app.Append(refs[i], lsets[i], ts, float64(sec*(1000+i)))
			if err != nil {
				b.Fatal(err)
			}
			refs[i] = ref
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRollupStep rolls up one minute of 1 Hz data, and 30 minutes
// as Run does since issue 12; each iteration redoes the same range (the
// rewrite is what an interrupted pass costs).
func BenchmarkRollupStep(b *testing.B) {
	for _, c := range []struct{ series, minutes int }{{1000, 1}, {10000, 1}, {1000, 30}, {10000, 30}} {
		b.Run(fmt.Sprintf("series=%d/minutes=%d", c.series, c.minutes), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			fillRaw(b, s, c.series, 60*c.minutes)
			r, err := OpenRollup(s, RollupOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			now := base.Add(time.Duration(c.minutes+1) * time.Minute)
			b.ReportAllocs()
			for b.Loop() {
				r.watermark.Store(0)
				if n, err := r.Step(context.Background(), now); err != nil || n != c.minutes {
					b.Fatalf("step: %d minutes, %v", n, err)
				}
			}
			b.ReportMetric(float64(c.series*60*c.minutes)*float64(b.N)/b.Elapsed().Seconds(), "raw_samples/s")
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N)/float64(c.series*c.minutes)*1000, "ms/1000series-min")
		})
	}
}

// BenchmarkRollupQuery compares a 3h range query served by raw data only
// with the same query whose first two hours come from rollups.
func BenchmarkRollupQuery(b *testing.B) {
	const series = 100
	ctx := context.Background()
	full, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer full.Close()
	fillRaw(b, full, series, 3*3600)
	rollDir := b.TempDir()
	r, err := OpenRollup(full, RollupOptions{Dir: rollDir})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Step(ctx, base.Add(3*time.Hour+time.Minute)); err != nil {
		b.Fatal(err)
	}
	if err := r.Close(); err != nil {
		b.Fatal(err)
	}
	// The raw data of the last hour only, as after retention.
	recent, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer recent.Close()
	lsets := make([]labels.Labels, series)
	for i := range lsets {
		lsets[i] = labels.FromStrings(labels.MetricName, "node_context_switches_total", NodeLabel, fmt.Sprintf("cn%05d", i))
	}
	for sec := 2 * 3600; sec < 3*3600; sec++ {
		app := recent.Appender(ctx)
		for i := range lsets {
			if _, err := app.Append(0, lsets[i], base.Add(time.Duration(sec)*time.Second).UnixMilli(), float64(sec*(1000+i))); err != nil {
				b.Fatal(err)
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	r, err = OpenRollup(recent, RollupOptions{Dir: rollDir})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		name string
		q    storage.Queryable
	}{{"raw", full}, {"rollup+raw", r.Queryable()}} {
		api := query.New(c.q, query.Options{})
		for _, qs := range []string{"node_context_switches_total", "rate(node_context_switches_total[5m])"} {
			b.Run(c.name+"/"+qs, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					res, done, err := api.Range(ctx, qs, base.Add(5*time.Minute), base.Add(3*time.Hour-time.Second), time.Minute)
					if err != nil || res.Err != nil {
						b.Fatal(err, res.Err)
					}
					if m, _ := res.Matrix(); len(m) != series {
						b.Fatalf("%d series, want %d", len(m), series)
					}
					done()
				}
			})
		}
	}
}
