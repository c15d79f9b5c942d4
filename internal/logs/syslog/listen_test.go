package syslog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// gateSink blocks Submit while closed and keeps copies of what it got.
type gateSink struct {
	mu   sync.Mutex
	open chan struct{}
	got  []string
}

func (s *gateSink) Submit(ctx context.Context, msgs []Message) error {
	select {
	case <-s.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.got = append(s.got, m.Text)
	}
	return nil
}

func (s *gateSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

func runServer(t *testing.T, cfg Config, sink Sink) *Server {
	t.Helper()
	srv := NewServer(cfg, sink, slog.New(slog.DiscardHandler))
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv
}

// TestTCPBackpressure checks that a stalled sink stops the reading of a
// connection, so that the sender blocks, and that nothing is lost once the
// sink catches up.
func TestTCPBackpressure(t *testing.T) {
	sink := &gateSink{open: make(chan struct{})}
	srv := runServer(t, Config{TCPAddr: "127.0.0.1:0", BatchSize: 64}, sink)
	_, addr, _ := srv.Addrs()
	conn, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	line := fmt.Sprintf("<13>Jan  5 10:00:00 h app: %0100d\n", 0)
	sent := 0
	blocked := false
	for sent < 1_000_000 {
		conn.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := conn.Write([]byte(line)); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				blocked = true
				break
			}
			t.Fatal(err)
		}
		sent++
	}
	if !blocked {
		t.Fatalf("sent %d messages to a stalled sink without blocking", sent)
	}
	// Kernel buffers hold the rest; the server holds one batch at most.
	if n := sink.count(); n != 0 {
		t.Fatalf("sink got %d while closed", n)
	}
	t.Logf("sender blocked after %d messages (%d KiB)", sent, sent*len(line)>>10)
	close(sink.open)
	conn.SetWriteDeadline(time.Time{})
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	// The write that timed out may have sent part of a line: that part
	// arrives as a last, short message.
	for sink.count() < sent {
		if time.Now().After(deadline) {
			t.Fatalf("sink got %d of %d", sink.count(), sent)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := sink.count(); n > sent+1 {
		t.Fatalf("sink got %d, sent %d", n, sent)
	}
}

// TestUDPDropsCounted fills the UDP queue while the sink is stalled: what
// does not fit is dropped and counted, the rest arrives.
func TestUDPDropsCounted(t *testing.T) {
	sink := &gateSink{open: make(chan struct{})}
	srv := runServer(t, Config{UDPAddr: "127.0.0.1:0", UDPQueue: 16, BatchSize: 4}, sink)
	addr, _, _ := srv.Addrs()
	conn, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 200
	for i := range n {
		fmt.Fprintf(conn, "<13>Jan  5 10:00:00 h app: datagram %d", i)
	}
	st := srv.Stats()
	deadline := time.Now().Add(10 * time.Second)
	for st.UDPReceived.Load() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st.UDPReceived.Load() != n {
		t.Skipf("kernel dropped datagrams before us (%d of %d read); cannot check our counter", st.UDPReceived.Load(), n)
	}
	close(sink.open)
	for uint64(sink.count())+st.UDPDropped.Load() < n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got, dropped := sink.count(), st.UDPDropped.Load()
	if dropped == 0 || uint64(got)+dropped != n {
		t.Fatalf("got %d, dropped %d, sent %d", got, dropped, n)
	}
}
