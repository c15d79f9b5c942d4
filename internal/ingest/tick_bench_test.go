package ingest

import (
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

// BenchmarkHandlerTick stores one tick per op through the ingest handler
// (with its up=1), rotating over the nodes, as the server does for every
// decoded tick.
func BenchmarkHandlerTick(b *testing.B) {
	for _, c := range []struct{ nodes, series int }{{1, 300}, {100, 300}} {
		b.Run(fmt.Sprintf("nodes=%d/series=%d", c.nodes, c.series), func(b *testing.B) {
			st, err := store.Open(store.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			h := NewWithOptions(st, Options{Interval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
			descs := make([]*metric.Desc, c.series)
			vals := make([]float64, c.series)
			for i := range descs {
				descs[i] = metric.NewDesc("bench_metric", "", metric.Gauge, "i", strconv.Itoa(i))
				vals[i] = float64(i)
			}
			nodes := make([]string, c.nodes)
			for i := range nodes {
				nodes[i] = fmt.Sprintf("cn%05d", i)
			}
			t, n := time.Now().Add(-time.Hour), 0
			b.ReportAllocs()
			for b.Loop() {
				if n == 0 {
					t = t.Add(100 * time.Millisecond)
				}
				h.Tick(nodes[n], t, descs, vals)
				n = (n + 1) % len(nodes)
			}
			if e := h.Stats().Errors.Load(); e != 0 {
				b.Fatalf("%d errors", e)
			}
		})
	}
}
