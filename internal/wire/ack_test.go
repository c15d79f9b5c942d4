package wire_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Frame types the raw peer below sends and reads (docs/format/wire.md).
const (
	typClose = 4
	typPing  = 5
	typAck   = 6
	pingSize = 10 // header 6, no payload, CRC 4
)

// rawPeer is a sender speaking the protocol by hand (unkeyed, loopback),
// so a test sees every Ack the receiver sends.
type rawPeer struct {
	conn net.Conn
	fr   *wire.FrameReader
}

func dialRaw(t *testing.T, addr string) *rawPeer {
	t.Helper()
	conn := holdOpen(t, addr, nil)
	fr := wire.NewFrameReader(bufio.NewReader(conn), 1<<16)
	if _, err := wire.ClientHandshake(conn, fr, nil, "raw"); err != nil {
		t.Fatal(err)
	}
	return &rawPeer{conn, fr}
}

func (p *rawPeer) send(t *testing.T, typ byte, n int) {
	t.Helper()
	var b []byte
	for range n {
		b = wire.AppendFrame(b, typ, nil)
	}
	if _, err := p.conn.Write(b); err != nil {
		t.Fatal(err)
	}
}

// next reads the next Ack within d: its value, or ok false if the
// connection ended or d passed first (timeout tells which).
func (p *rawPeer) next(t *testing.T, d time.Duration) (n uint64, ok, timeout bool) {
	t.Helper()
	_ = p.conn.SetReadDeadline(time.Now().Add(d))
	for {
		typ, payload, err := p.fr.Next()
		if err != nil {
			return 0, false, isTimeout(err)
		}
		if typ != typAck {
			continue
		}
		n, k := binary.Uvarint(payload)
		if k <= 0 {
			t.Fatalf("bad ack payload %x", payload)
		}
		return n, true, false
	}
}

// Ticks at 200 Hz for half a second, with the default options: a handful
// of Acks, not one a tick, and the last tick is acknowledged within the
// ack interval once the ticks stop.
func TestAcksBatched(t *testing.T) {
	srv := serve(t, wire.ServerOptions{})
	c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn1"})
	waitFor(t, "connection", func() bool { return c.Stats().Connected.Load() })
	cs := c.NewStream("cn1")
	n := simulate.NewNode("cn1", simulate.NewSchema(2), 1)
	t0 := time.Unix(1_763_800_000, 0)
	const k = 100
	for i := range k {
		sendTicks(c, cs, n, t0, i, 1)
		time.Sleep(5 * time.Millisecond)
	}
	stopped := time.Now()
	waitFor(t, "all ticks acknowledged", func() bool { return pendingNone(c) })
	took := time.Since(stopped)
	acks := srv.stats.Acks.Load()
	t.Logf("%d ticks, %d acks; last acknowledged %v after the ticks stopped", k, acks, took)
	if acks == 0 || acks > 4 {
		t.Errorf("%d acks for %d ticks over %v, want 1 to 4", acks, k, stopped.Sub(t0))
	}
	if limit := wire.DefaultAckInterval + time.Second; took > limit {
		t.Errorf("last tick acknowledged %v after the ticks stopped, want within %v", took, limit)
	}
	if srv.rec.tickCount() != k {
		t.Errorf("%d ticks received, want %d", srv.rec.tickCount(), k)
	}
}

// Traffic stops: the Ack comes when due, not at the next frame.
func TestAckDueWhenIdle(t *testing.T) {
	const interval = 150 * time.Millisecond
	srv := serve(t, wire.ServerOptions{AckInterval: interval})
	p := dialRaw(t, srv.addr)
	for round := 1; round <= 3; round++ {
		sent := time.Now()
		p.send(t, typPing, 5)
		n, ok, _ := p.next(t, 5*time.Second)
		took := time.Since(sent)
		if !ok || n != uint64(round*5*pingSize) {
			t.Fatalf("round %d: ack %d (%v), want %d", round, n, ok, round*5*pingSize)
		}
		if took < interval/2 || took > interval+time.Second {
			t.Errorf("round %d: acknowledged after %v, want about %v", round, took, interval)
		}
	}
	// Counted after the write, so perhaps after the peer read it.
	waitFor(t, "3 acks counted", func() bool { return srv.stats.Acks.Load() >= 3 })
	if a := srv.stats.Acks.Load(); a != 3 {
		t.Errorf("%d acks, want 3", a)
	}
}

// Past AckBytes the receiver acknowledges without waiting for the interval.
func TestAckBytesFirst(t *testing.T) {
	srv := serve(t, wire.ServerOptions{AckInterval: time.Hour, AckBytes: 1000})
	p := dialRaw(t, srv.addr)
	p.send(t, typPing, 99) // 990 bytes: not yet
	if n, ok, timeout := p.next(t, 300*time.Millisecond); ok || !timeout {
		t.Fatalf("ack %d (ok %v) before AckBytes were handled", n, ok)
	}
	p.send(t, typPing, 1)
	n, ok, _ := p.next(t, 5*time.Second)
	if !ok || n != 1000 {
		t.Fatalf("ack %d (%v), want 1000", n, ok)
	}
}

// A sender's Close and the receiver's shutdown each get a last Ack of
// everything handled before the connection closes.
func TestFinalAck(t *testing.T) {
	t.Run("close from the sender", func(t *testing.T) {
		srv := serve(t, wire.ServerOptions{AckInterval: time.Hour})
		p := dialRaw(t, srv.addr)
		p.send(t, typPing, 7)
		p.send(t, typClose, 1) // an empty reason
		n, ok, _ := p.next(t, 5*time.Second)
		if !ok || n != 7*pingSize {
			t.Fatalf("ack %d (%v), want %d", n, ok, 7*pingSize)
		}
		if _, ok, timeout := p.next(t, 5*time.Second); ok || timeout {
			t.Errorf("connection not closed after the last ack (ack %v, timeout %v)", ok, timeout)
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		srv := serve(t, wire.ServerOptions{AckInterval: time.Hour})
		p := dialRaw(t, srv.addr)
		p.send(t, typPing, 3)
		waitFor(t, "frames read", func() bool { return srv.stats.Frames.Load() == 3 })
		start := time.Now()
		srv.stop()
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("Serve took %v to stop", d)
		}
		n, ok, _ := p.next(t, 5*time.Second)
		if !ok || n != 3*pingSize {
			t.Fatalf("ack %d (%v), want %d", n, ok, 3*pingSize)
		}
		_ = p.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := p.fr.Next(); !errors.Is(err, io.EOF) {
			t.Errorf("after the last ack: %v, want EOF", err)
		}
	})
}

// With HandledBefore (an aggregator) a frame is acknowledged only once
// the handler's upstream has it, and then within about an interval
// although the sender has gone quiet.
func TestAckWaitsForHandledBefore(t *testing.T) {
	const interval = 100 * time.Millisecond
	var upstream atomicTime
	upstream.Store(time.Now())
	srv := serve(t, wire.ServerOptions{AckInterval: interval, HandledBefore: upstream.Load})
	p := dialRaw(t, srv.addr)
	p.send(t, typPing, 4)
	if n, ok, _ := p.next(t, 5*interval); ok {
		t.Fatalf("ack %d before the upstream had the frames", n)
	}
	delivered := time.Now()
	upstream.Store(delivered)
	n, ok, _ := p.next(t, 5*time.Second)
	if !ok || n != 4*pingSize {
		t.Fatalf("ack %d (%v), want %d", n, ok, 4*pingSize)
	}
	if d := time.Since(delivered); d > interval+time.Second {
		t.Errorf("acknowledged %v after the upstream had the frames", d)
	}
}

// atomicTime is a time shared with the server's goroutines.
type atomicTime struct{ ns atomic.Int64 }

func (a *atomicTime) Store(t time.Time) { a.ns.Store(t.UnixNano()) }
func (a *atomicTime) Load() time.Time   { return time.Unix(0, a.ns.Load()) }

// An Ack the upstream never allows does not keep a silent peer's
// connection open past ReadTimeout.
func TestSilentPeerDroppedWhileAckDue(t *testing.T) {
	const timeout = 400 * time.Millisecond
	never := func() time.Time { return time.Unix(0, 0) }
	srv := serve(t, wire.ServerOptions{ReadTimeout: timeout, AckInterval: 50 * time.Millisecond, HandledBefore: never})
	p := dialRaw(t, srv.addr)
	sent := time.Now()
	p.send(t, typPing, 2)
	if n, ok, timedOut := p.next(t, 5*time.Second); ok || timedOut {
		t.Fatalf("ack %d (%v) or still open after 5s; want the connection closed", n, ok)
	}
	if d := time.Since(sent); d < timeout || d > timeout+2*time.Second {
		t.Errorf("closed after %v, want about %v", d, timeout)
	}
}
