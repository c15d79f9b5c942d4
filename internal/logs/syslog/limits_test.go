package syslog

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countSink accepts everything and counts it.
type countSink struct{ n atomic.Int64 }

func (s *countSink) Submit(_ context.Context, msgs []Message) error {
	s.n.Add(int64(len(msgs)))
	return nil
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedByServer reports whether the server closed c within 5 s.
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF || (err != nil && !isTimeout(err))
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestTCPConnectionCaps checks the per-listener and the per-source caps:
// connections beyond them are closed at once and counted, and the ones
// within still deliver.
func TestTCPConnectionCaps(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	sink := &countSink{}
	srv := runServer(t, Config{TCPAddr: "127.0.0.1:0", Metrics: m,
		Limits: Limits{MaxConns: 3, MaxConnsPerHost: 2}}, sink)
	_, a, _ := srv.Addrs()
	addr := a.String()

	c1 := dialFrom(t, "127.0.0.1", addr)
	c2 := dialFrom(t, "127.0.0.1", addr)
	waitFor(t, "two connections", func() bool { return testutil.ToFloat64(m.ConnsOpen.WithLabelValues("tcp")) == 2 })
	c3 := dialFrom(t, "127.0.0.1", addr) // third from the same host
	if !closedByServer(c3) {
		t.Fatal("third connection from one host was not closed")
	}
	c4 := dialFrom(t, "127.0.0.2", addr) // another host: within both caps
	waitFor(t, "third connection", func() bool { return testutil.ToFloat64(m.ConnsOpen.WithLabelValues("tcp")) == 3 })
	c5 := dialFrom(t, "127.0.0.3", addr) // listener full
	if !closedByServer(c5) {
		t.Fatal("connection beyond the listener cap was not closed")
	}
	for _, c := range []net.Conn{c1, c2, c4} {
		fmt.Fprintf(c, "<13>Jan  5 10:00:00 h app: hello\n")
	}
	waitFor(t, "messages of the admitted connections", func() bool { return sink.n.Load() == 3 })
	if got := testutil.ToFloat64(m.ConnsRefuse.WithLabelValues("tcp", ReasonMaxConnsHost)); got != 1 {
		t.Errorf("refused per host = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.ConnsRefuse.WithLabelValues("tcp", ReasonMaxConns)); got != 1 {
		t.Errorf("refused per listener = %v, want 1", got)
	}
	// A slot freed is usable again.
	c1.Close()
	waitFor(t, "slot freed", func() bool { return testutil.ToFloat64(m.ConnsOpen.WithLabelValues("tcp")) == 2 })
	c6 := dialFrom(t, "127.0.0.1", addr)
	fmt.Fprintf(c6, "<13>Jan  5 10:00:00 h app: again\n")
	waitFor(t, "message on the freed slot", func() bool { return sink.n.Load() == 4 })
}

// TestTCPIdleAndFrameTimeouts checks that a silent connection is closed
// after the idle timeout, and that a sender dribbling an unfinished line
// (one byte at a time, well within the idle timeout) is closed after the
// frame timeout.
func TestTCPIdleAndFrameTimeouts(t *testing.T) {
	m := NewMetrics(nil)
	srv := runServer(t, Config{TCPAddr: "127.0.0.1:0", Metrics: m,
		Limits: Limits{IdleTimeout: 300 * time.Millisecond, FrameTimeout: 400 * time.Millisecond}}, &countSink{})
	_, a, _ := srv.Addrs()

	idle := dialFrom(t, "127.0.0.1", a.String())
	start := time.Now()
	if !closedByServer(idle) {
		t.Fatal("idle connection not closed")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before the idle timeout", d)
	}
	waitFor(t, "idle close counted", func() bool {
		return testutil.ToFloat64(m.ConnsClosed.WithLabelValues("tcp", ReasonIdleTimeout)) == 1
	})

	slow := dialFrom(t, "127.0.0.1", a.String())
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		slow.Write([]byte("<13>Jan  5 10:00:00 h app: never ending"))
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				if _, err := slow.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	start = time.Now()
	if !closedByServer(slow) {
		t.Fatal("dribbling connection not closed")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("dribbling connection closed only after %v", d)
	}
	waitFor(t, "frame timeout counted", func() bool {
		return testutil.ToFloat64(m.ConnsClosed.WithLabelValues("tcp", ReasonFrameTimeout)) == 1
	})
}

// TestIdleConnectionMemory holds many connections, each with an unfinished
// line, and checks what each costs on the heap: it used to be a 64 KiB
// read buffer plus a 1024-message batch (3,000 such connections took
// 1.41 GB).
func TestIdleConnectionMemory(t *testing.T) {
	const n = 300
	srv := runServer(t, Config{TCPAddr: "127.0.0.1:0", Limits: Limits{MaxConnsPerHost: -1}}, &countSink{})
	_, a, _ := srv.Addrs()
	// Warm up the runtime's and listener's own allocations.
	c := dialFrom(t, "127.0.0.1", a.String())
	fmt.Fprintf(c, "<13>Jan  5 10:00:00 h app: warm up\n")
	waitFor(t, "warm-up", func() bool { return srv.Stats().ConnsOpen.Load() == 1 })
	before := heapAlloc()
	line := "<13>Jan  5 10:00:00 h app: " + strings.Repeat("z", 100)
	for range n {
		c := dialFrom(t, "127.0.0.1", a.String())
		if _, err := c.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "connections open", func() bool { return srv.Stats().ConnsOpen.Load() == n+1 })
	// Let every connection read its partial line.
	time.Sleep(100 * time.Millisecond)
	per := (int64(heapAlloc()) - int64(before)) / n
	t.Logf("heap per connection holding a partial line: %d bytes", per)
	if per > 16<<10 {
		t.Fatalf("each connection holds %d bytes of heap, want at most 16 KiB", per)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestUDPKernelDropsCounted fills a small socket buffer while nothing
// reads it, then checks that every datagram sent is either received or
// counted as dropped by the kernel.
func TestUDPKernelDropsCounted(t *testing.T) {
	m := NewMetrics(nil)
	sink := &countSink{}
	srv := NewServer(Config{UDPAddr: "127.0.0.1:0", UDPReadBuffer: 4096, Metrics: m}, sink, nil)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ua, _, _ := srv.Addrs()
	c, err := net.Dial("udp", ua.String())
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	defer c.Close()
	// Not read yet: the burst overflows the buffer.
	const burst = 500
	sent := 0
	for i := range burst {
		fmt.Fprintf(c, "<13>Jan  5 10:00:00 h app: burst %d %s", i, strings.Repeat("b", 200))
		sent++
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	st := srv.Stats()
	// The drop count comes with the next datagram that gets through.
	waitFor(t, "every datagram received or counted", func() bool {
		fmt.Fprintf(c, "<13>Jan  5 10:00:00 h app: marker %d", sent)
		sent++
		time.Sleep(5 * time.Millisecond)
		return st.UDPReceived.Load()+st.UDPKernelDropped.Load() == uint64(sent)
	})
	if st.UDPKernelDropped.Load() == 0 {
		t.Fatalf("no kernel drops counted; received %d of %d", st.UDPReceived.Load(), sent)
	}
	if got := testutil.ToFloat64(m.Dropped.WithLabelValues("udp", ReasonKernelOverflow)); got != float64(st.UDPKernelDropped.Load()) {
		t.Fatalf("metric %v, stats %d", got, st.UDPKernelDropped.Load())
	}
	t.Logf("sent %d, received %d, kernel dropped %d", sent, st.UDPReceived.Load(), st.UDPKernelDropped.Load())
}
