package wire_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// BenchmarkClientTick queues one recorded tick per op on a client streaming
// to a live loopback server: encoding and queueing on the caller's side,
// with the sender goroutine writing and the acknowledgements coming back
// meanwhile, as on a sampler.
func BenchmarkClientTick(b *testing.B) {
	for _, cpus := range []int{16, 64} {
		b.Run(fmt.Sprintf("cpus=%d", cpus), func(b *testing.B) {
			ticks := record(cpus, 1000, time.Second, 42)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			quiet := slog.New(slog.DiscardHandler)
			done := make(chan struct{}, 2)
			go func() { _ = wire.Serve(ctx, ln, wire.ServerOptions{Log: quiet}, wire.NopHandler{}); done <- struct{}{} }()
			c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{ln.Addr().String()}, Name: "bench", Log: quiet})
			if err != nil {
				b.Fatal(err)
			}
			go func() { _ = c.Run(ctx); done <- struct{}{} }()
			defer func() { cancel(); <-done; <-done }()
			for !c.Stats().Connected.Load() {
				time.Sleep(time.Millisecond)
			}
			cs := c.NewStream("cn00001")
			t0, i, round := ticks[0].Time, 0, time.Duration(0)
			b.ReportAllocs()
			for b.Loop() {
				if i == len(ticks) {
					i, round = 0, round+time.Duration(len(ticks))*time.Second
				}
				tk := &ticks[i]
				c.Tick(cs, t0.Add(round+time.Duration(i)*time.Second), tk.Descs, tk.Values)
				i++
			}
		})
	}
}
