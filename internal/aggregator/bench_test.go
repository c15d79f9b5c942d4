package aggregator

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// recordFrames encodes ticks of simulated nodes as one connection carrying
// all of them would: tick-major, each node its own stream.
func recordFrames(b *testing.B, nodes, ticks int) (frames [][]byte, values []int) {
	b.Helper()
	sch := simulate.NewSchema(16)
	enc := wire.NewEncoder()
	t0 := time.Unix(1_763_800_000, 0)
	sims := make([]*simulate.Node, nodes)
	streams := make([]*wire.Stream, nodes)
	for i := range sims {
		name := simulate.NodeName(i + 1)
		sims[i] = simulate.NewNode(name, sch, uint64(i))
		streams[i] = enc.NewStream(name)
	}
	var batch metric.Batch
	for k := 0; k < ticks; k++ {
		t := t0.Add(time.Duration(k) * time.Second)
		for i, n := range sims {
			batch.Reset(t)
			n.Sample(t, time.Second, &batch)
			f, err := enc.AppendTick(nil, streams[i], batch.Time, batch.Descs, batch.Values)
			if err != nil {
				b.Fatal(err)
			}
			frames = append(frames, f)
			values = append(values, batch.Len())
		}
	}
	return frames, values
}

// BenchmarkForward is one aggregator's hot path in one process: check a
// child's frame, RelayTick (liveness, stream lookup), queue it for the
// upstream as it came.
// One op is one node's tick (about 330 values). The upstream is a wire
// server on loopback in this process that decodes and discards, so its
// CPU competes with the measured path as on a real 2-core aggregator host;
// the loop waits when the upstream falls more than a few MB behind, so
// the figure is a sustained rate, not the speed of filling a buffer.
func BenchmarkForward(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			frames, nvals := recordFrames(b, nodes, 20)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var up wire.ServerStats
			go wire.Serve(ctx, ln, wire.ServerOptions{Log: quiet(), Stats: &up}, wire.NopHandler{})
			a, err := New(Config{Name: "agg-bench", Listen: "127.0.0.1:0", Upstream: []string{ln.Addr().String()},
				BufferBytes: 64 << 20, Log: quiet()})
			if err != nil {
				b.Fatal(err)
			}
			go a.client.Run(ctx)
			for !a.client.Stats().Connected.Load() {
				time.Sleep(time.Millisecond)
			}
			dec := wire.NewDecoder(wire.Limits{}, nil)
			var r bytes.Reader
			fr := wire.NewFrameReader(&r, 0)
			decode := func(f []byte) {
				r.Reset(f)
				for {
					typ, payload, err := fr.Next()
					if err != nil {
						return
					}
					if err := dec.Decode(typ, payload, a); err != nil {
						b.Fatal(err)
					}
				}
			}
			// One round first, so the schemas are out of the way.
			for _, f := range frames[:nodes] {
				decode(f)
			}
			const maxBehind = 4 << 20 // values
			var values uint64
			i := nodes
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if i == len(frames) {
					i = 0 // tick 0 carries full schemas, so wrapping is valid
				}
				decode(frames[i])
				values += uint64(nvals[i])
				i++
				if i%1024 == 0 {
					for a.forwarded.Load() > up.Values.Load()+maxBehind {
						time.Sleep(100 * time.Microsecond)
					}
				}
			}
			b.StopTimer()
			if d := a.dropped.Load(); d > 0 {
				b.Fatalf("%d values dropped: the upstream did not keep up", d)
			}
			b.ReportMetric(float64(values)/b.Elapsed().Seconds(), "values/s")
			b.ReportMetric(float64(values)/float64(b.N), "values/op")
		})
	}
}
