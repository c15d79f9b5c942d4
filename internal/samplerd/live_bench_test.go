package samplerd

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// BenchmarkTickLive samples this machine's own /proc and /sys with
// bench/samplercost's plugins and encodes the tick, back to back: the work
// of a tick with warm caches. At 10 Hz the same tick costs several times
// more (docs/benchmarks.md, "Sampler CPU per tick, profiled").
func BenchmarkTickLive(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads the live /proc")
	}
	o := &Options{Config: config.Defaults(), Node: "bench", Root: "/", Interval: 100 * time.Millisecond,
		Plugins: strings.Split("cpu,memory,vmstat,load,netdev,diskstats,filesystem,self", ",")}
	s, err := Build(o, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var batch metric.Batch
	now := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	enc := wire.NewEncoder()
	st := enc.NewStream("bench")
	var buf []byte
	for range 3 { // first ticks build descriptors and buffers
		now = now.Add(100 * time.Millisecond)
		s.CollectOnce(ctx, now, &batch)
		buf, _ = enc.AppendTick(buf[:0], st, now, batch.Descs, batch.Values)
	}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(100 * time.Millisecond)
		s.CollectOnce(ctx, now, &batch)
		if buf, err = enc.AppendTick(buf[:0], st, now, batch.Descs, batch.Values); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch.Len()), "values/tick")
}
