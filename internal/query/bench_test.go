package query

import (
	"context"
	"flag"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/vigil-hpc/vigil/internal/store"
)

var benchSeries = flag.Int("range-series", 1000, "series of the BenchmarkRange dataset (the issue asks for 10000)")

// BenchmarkRange times an hour of one 1 Hz counter over -range-series
// nodes at step 15 s, as bench/ingestcmp does, on the head and on a block,
// evaluated whole, split into runs of steps, and sharded by series. Each
// iteration runs every mode once, in rotating order, so that a busy moment
// of a shared machine or the head's chunks being m-mapped a minute after
// start hits all of them alike; the metrics are each mode's median wall
// and CPU time.
func BenchmarkRange(b *testing.B) {
	st, err := store.Open(store.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.FillCounter("node_context_switches_total", *benchSeries, 3600, base, func(n int) string { return "cn" + strconv.Itoa(n) }); err != nil {
		b.Fatal(err)
	}
	a := New(st, Options{})
	start, end := base, base.Add(time.Hour)
	const step = 15 * time.Second
	cores := runtime.GOMAXPROCS(0)
	type mode struct {
		name string
		run  func(qs string) (*promql.Result, func(), error)
	}
	modes := []mode{
		{"whole", func(qs string) (*promql.Result, func(), error) {
			return a.wholeRange(context.Background(), qs, start, end, step)
		}},
		{"steps", func(qs string) (*promql.Result, func(), error) {
			return a.splitRange(context.Background(), qs, start, end, step, cores)
		}},
	}
	for _, n := range []int{cores, shardsPerCore * cores} {
		modes = append(modes, mode{"shards" + strconv.Itoa(n), func(qs string) (*promql.Result, func(), error) {
			return a.shardRange(context.Background(), qs, start, end, step, n)
		}})
	}
	for _, where := range []string{"head", "block"} {
		if where == "block" {
			if err := st.CompactHead(); err != nil {
				b.Fatal(err)
			}
		}
		for _, qs := range []string{"rate(node_context_switches_total[1m])", "node_context_switches_total"} {
			b.Run(where+"/"+qs, func(b *testing.B) {
				b.ReportAllocs()
				wall := make([][]time.Duration, len(modes))
				cpu := make([][]time.Duration, len(modes))
				for i := 0; b.Loop(); i++ {
					for k := range modes {
						m := (i + k) % len(modes)
						t0, c0 := time.Now(), cpuTime()
						res, done, err := modes[m].run(qs)
						if err == nil {
							err = res.Err
						}
						if err != nil {
							b.Fatal(err)
						}
						done()
						wall[m] = append(wall[m], time.Since(t0))
						cpu[m] = append(cpu[m], cpuTime()-c0)
					}
				}
				for m, md := range modes {
					b.ReportMetric(median(wall[m]).Seconds()*1e3, md.name+"-ms")
					b.ReportMetric(median(cpu[m]).Seconds()*1e3, md.name+"-cpu-ms")
				}
			})
		}
	}
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// cpuTime is the CPU time used by the process so far: wall time on a
// shared machine says little about how much work a mode does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
