package wire_test

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// losing gives up on every tick from the third on, as a server whose
// store cannot write does.
type losing struct {
	wire.NopHandler
	ticks, unkept atomic.Uint64
}

func (h *losing) Tick(string, time.Time, []*metric.Desc, []float64) {
	if h.ticks.Add(1) >= 3 {
		h.unkept.Add(1)
	}
}

func (h *losing) Unkept() uint64 { return h.unkept.Load() }

// A frame the handler could not keep is never acknowledged: the
// connection closes first, and the sender sends the tick again on its
// next connection instead of believing it stored.
func TestUnkeptFrameNotAcknowledged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &losing{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wire.Serve(ctx, ln, wire.ServerOptions{Log: slog.New(slog.DiscardHandler)}, h)
	}()
	defer func() { cancel(); <-done }()
	c := startClient(t, wire.ClientOptions{Addrs: []string{ln.Addr().String()}, Name: "cn00009"})
	n := simulate.NewNode("cn00009", simulate.NewSchema(2), 5)
	cs := c.NewStream("cn00009")
	t0 := time.Unix(1_763_800_000, 0)
	sendTicks(c, cs, n, t0, 0, 2)
	waitFor(t, "two ticks acknowledged", func() bool { return h.ticks.Load() == 2 && pendingNone(c) })
	sendTicks(c, cs, n, t0, 2, 1)
	waitFor(t, "connection closed and made again", func() bool { return c.Stats().Connects.Load() >= 2 })
	waitFor(t, "the unkept tick sent again", func() bool { return h.ticks.Load() >= 4 })
	if d := c.Stats().Dropped.Load(); d != 0 {
		t.Errorf("sender counts %d ticks lost, want 0 (the unkept one goes again)", d)
	}
}

// pendingNone reports that the client holds no tick unacknowledged.
func pendingNone(c *wire.Client) bool {
	return !c.DeliveredBefore().Before(time.Now().Add(-time.Millisecond))
}
