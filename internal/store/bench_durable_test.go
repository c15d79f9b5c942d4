package store

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// BenchmarkAppendTickParallel appends ticks of 1000 nodes from all
// GOMAXPROCS goroutines at once, as ingest does with many connections:
// it shows what serialising commits (durable.go) costs.
func BenchmarkAppendTickParallel(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	descs := make([]*metric.Desc, 100)
	vals := make([]float64, len(descs))
	for i := range descs {
		descs[i] = metric.NewDesc("bench_metric", "", metric.Gauge, "i", strconv.Itoa(i))
		vals[i] = float64(i)
	}
	var worker atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		nodes := make([]string, 1000)
		for i := range nodes {
			nodes[i] = fmt.Sprintf("w%d-cn%05d", w, i)
		}
		t, n := base, 0
		for pb.Next() {
			if n == 0 {
				t = t.Add(100 * time.Millisecond)
			}
			if err := s.AppendTick(nodes[n], t, descs, vals, false); err != nil {
				b.Error(err)
				return
			}
			n = (n + 1) % len(nodes)
		}
	})
	b.ReportMetric(float64(b.N)*float64(len(descs))/b.Elapsed().Seconds(), "samples/s")
}
