package wire_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// drainRec is a relaying handler that notes when each frame is said to
// have arrived, when it is handled, and the Drained calls between.
type drainRec struct {
	wire.NopHandler
	mu      sync.Mutex
	arrived []time.Time
	handled []time.Time
	events  []string // "tick" or "drained", in order
}

func (r *drainRec) RelaySchema(string, *wire.RelaySchema) {}
func (r *drainRec) RelayTick(_ string, _ time.Time, f *wire.RelayFrame) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived = append(r.arrived, f.Arrived)
	r.handled = append(r.handled, now)
	r.events = append(r.events, "tick")
}
func (r *drainRec) Drained() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "drained")
}

// TestRelayFrameArrivedAndDrained: a relay is told when each frame
// arrived without a clock read per frame, never earlier than it was sent
// (also after the connection sat idle) nor later than it was handled,
// and is told each time its input drains, last after the final frame.
func TestRelayFrameArrivedAndDrained(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &drainRec{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wire.Serve(ctx, ln, wire.ServerOptions{Name: "test-relay", AckInterval: 20 * time.Millisecond}, rec)
	}()
	t.Cleanup(func() { cancel(); <-done })
	c := startClient(t, wire.ClientOptions{Addrs: []string{ln.Addr().String()}, Name: "cn00001"})
	n := simulate.NewNode("cn00001", simulate.NewSchema(4), 7)
	cs := c.NewStream("cn00001")
	t0 := time.Unix(1_763_800_000, 0)
	count := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.arrived)
	}
	sendTicks(c, cs, n, t0, 0, 1)
	waitFor(t, "the first tick", func() bool { return count() == 1 })
	for round := range 3 {
		// Idle past the Ack interval: the reader waits in a read with
		// nothing due.
		time.Sleep(200 * time.Millisecond)
		sent := time.Now()
		have := count()
		sendTicks(c, cs, n, t0, 1+round*100, 100)
		waitFor(t, "a round of ticks", func() bool { return count() == have+100 })
		rec.mu.Lock()
		for i := have; i < have+100; i++ {
			a, h := rec.arrived[i], rec.handled[i]
			if a.Before(sent) || a.After(h) {
				t.Errorf("round %d, tick %d: arrived %v after the send began, handled %v after it", round, i-have,
					a.Sub(sent), h.Sub(sent))
			}
		}
		rec.mu.Unlock()
	}
	waitFor(t, "a drain after the last tick", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.events[len(rec.events)-1] == "drained"
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	drains := 0
	for _, e := range rec.events {
		if e == "drained" {
			drains++
		}
	}
	if drains == 0 || drains > len(rec.arrived) {
		t.Errorf("%d drains for %d frames", drains, len(rec.arrived))
	}
}
