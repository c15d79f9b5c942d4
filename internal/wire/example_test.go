package wire_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// printer is a Handler printing the first tick it gets.
type printer struct {
	wire.NopHandler
	got chan string
}

func (p *printer) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) {
	p.got <- fmt.Sprintf("%s %s %s=%v", node, t.UTC().Format(time.RFC3339), descs[0].Name, values[0])
}

// A sampler-side Client streaming one tick to a Serve-d Handler.
func Example() {
	quiet := slog.New(slog.DiscardHandler)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // no key: loopback only
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &printer{got: make(chan string, 1)}
	go func() { _ = wire.Serve(ctx, ln, wire.ServerOptions{Name: "agg1", Log: quiet}, h) }()

	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{ln.Addr().String()}, Name: "cn00001", Log: quiet})
	if err != nil {
		panic(err)
	}
	go func() { _ = c.Run(ctx) }()

	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	var b metric.Batch
	b.Reset(time.Unix(1_763_800_000, 0))
	b.Add(load, 0.52)
	c.Tick(c.NewStream("cn00001"), b.Time, b.Descs, b.Values) // encodes and queues; never blocks
	fmt.Println(<-h.got)
	// Output: cn00001 2025-11-22T08:26:40Z node_load1=0.52
}
