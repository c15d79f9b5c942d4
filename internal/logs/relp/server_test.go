package relp

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// memSink keeps message texts; while gate is non-nil Submit waits on it.
type memSink struct {
	mu      sync.Mutex
	got     []syslog.Message
	gate    chan struct{}
	entered chan struct{}
}

func (s *memSink) Submit(ctx context.Context, msgs []syslog.Message) error {
	s.mu.Lock()
	gate := s.gate
	s.gate = nil // holds the first batch only
	s.mu.Unlock()
	if gate != nil {
		s.entered <- struct{}{}
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, msgs...)
	return nil
}

func (s *memSink) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, m := range s.got {
		out = append(out, m.Text)
	}
	return out
}

func startServer(t *testing.T, cfg Config, sink syslog.Sink) (*Server, context.CancelFunc) {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	cfg.Location = time.UTC
	srv := NewServer(cfg, sink, nil)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv, cancel
}

// client is a minimal RELP client for tests.
type client struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	txnr uint32
}

func dial(t *testing.T, srv *Server) *client {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) send(cmd, data string) uint32 {
	c.t.Helper()
	c.txnr++
	if _, err := c.c.Write(AppendFrame(nil, c.txnr, cmd, []byte(data))); err != nil {
		c.t.Fatal(err)
	}
	return c.txnr
}

// recv reads one frame within 5 s.
func (c *client) recv() (Header, string, error) {
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var buf []byte
	for {
		b, err := c.r.ReadByte()
		if err != nil {
			return Header{}, "", err
		}
		buf = append(buf, b)
		h, data, n, err := ParseFrame(buf, 1<<20)
		if err != nil {
			return h, "", err
		}
		if n > 0 {
			return h, string(data), nil
		}
	}
}

func (c *client) expect(txnr uint32, cmd, prefix string) {
	c.t.Helper()
	h, data, err := c.recv()
	if err != nil || h.Txnr != txnr || h.Cmd != cmd || !strings.HasPrefix(data, prefix) {
		c.t.Fatalf("got %+v %q %v, want %d %s %q...", h, data, err, txnr, cmd, prefix)
	}
}

func (c *client) open() {
	c.t.Helper()
	t := c.send("open", "relp_version=0\nrelp_software=test\ncommands=syslog")
	c.expect(t, "rsp", "200 OK\n")
}

func msg(i int) string {
	return fmt.Sprintf("<13>2026-01-05T10:00:00.%06dZ cn01 app: message %d", i, i)
}

// TestAckAfterCommit checks that a message is acknowledged only once the
// sink has returned, and that acknowledgements come in order.
func TestAckAfterCommit(t *testing.T) {
	gate := make(chan struct{})
	sink := &memSink{gate: gate, entered: make(chan struct{}, 1)}
	srv, _ := startServer(t, Config{}, sink)
	c := dial(t, srv)
	c.open()
	t1 := c.send("syslog", msg(1))
	<-sink.entered // the sink holds the batch
	c.c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if b, err := c.r.ReadByte(); err == nil {
		t.Fatalf("read %q before the commit, want nothing", b)
	}
	close(gate)
	c.r = bufio.NewReader(c.c)
	c.expect(t1, "rsp", "200 OK")
	t2 := c.send("syslog", msg(2))
	t3 := c.send("syslog", msg(3))
	c.expect(t2, "rsp", "200 OK")
	c.expect(t3, "rsp", "200 OK")
	tc := c.send("close", "")
	c.expect(tc, "rsp", "")
	if got := sink.texts(); len(got) != 3 || got[2] != "message 3" {
		t.Fatalf("stored %q", got)
	}
}

// TestResendStoredOnce sends messages, drops the connection without
// reading the acknowledgements, and resends from an earlier point on a new
// session, as librelp does: every message is stored once and acknowledged
// again; an identical message later in the session is kept.
func TestResendStoredOnce(t *testing.T) {
	sink := &memSink{}
	m := syslog.NewMetrics(nil)
	srv, _ := startServer(t, Config{Dedup: NewDedup(1000), Metrics: m}, sink)
	c := dial(t, srv)
	c.open()
	for i := 1; i <= 5; i++ {
		c.send("syslog", msg(i))
	}
	for i := 1; i <= 5; i++ {
		c.expect(uint32(i+1), "rsp", "200 OK")
	}
	c.c.Close()

	c2 := dial(t, srv)
	c2.open()
	var txnrs []uint32
	for _, i := range []int{3, 4, 5, 6, 7, 4} { // 3..5 resent, 6 and 7 new, 4 again later
		txnrs = append(txnrs, c2.send("syslog", msg(i)))
	}
	for _, tx := range txnrs {
		c2.expect(tx, "rsp", "200 OK")
	}
	want := []string{"message 1", "message 2", "message 3", "message 4", "message 5", "message 6", "message 7", "message 4"}
	if got := sink.texts(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("stored %q, want %q", got, want)
	}
	if got := testutil.ToFloat64(m.Dropped.WithLabelValues("relp", syslog.ReasonDuplicate)); got != 3 {
		t.Fatalf("duplicates counted %v, want 3", got)
	}
	// A third session resending 5 again: its ack may have been lost twice.
	c3 := dial(t, srv)
	c3.open()
	c3.expect(c3.send("syslog", msg(5)), "rsp", "200 OK")
	if got := len(sink.texts()); got != len(want) {
		t.Fatalf("%d stored after a second resend, want %d", got, len(want))
	}
}

// TestProtocolErrors checks that hostile or broken sessions end, are
// counted, and do not disturb the server.
func TestProtocolErrors(t *testing.T) {
	sink := &memSink{}
	m := syslog.NewMetrics(nil)
	srv, _ := startServer(t, Config{Metrics: m, MaxFrame: 64}, sink)
	closed := func(c *client) {
		t.Helper()
		for {
			if _, _, err := c.recv(); err != nil {
				if strings.Contains(err.Error(), "timeout") {
					t.Fatal("connection still open")
				}
				return
			}
		}
	}
	// Garbage.
	c := dial(t, srv)
	c.c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	closed(c)
	// syslog before open.
	c = dial(t, srv)
	tx := c.send("syslog", msg(1))
	c.expect(tx, "rsp", "500")
	closed(c)
	// Transaction numbers out of sequence.
	c = dial(t, srv)
	c.open()
	c.txnr += 5
	tx = c.send("syslog", msg(1))
	c.expect(tx, "rsp", "500")
	closed(c)
	// No syslog command offered.
	c = dial(t, srv)
	tx = c.send("open", "relp_version=0\ncommands=other")
	c.expect(tx, "rsp", "500")
	closed(c)
	// An oversized message is cut and stored, an unknown command answered.
	c = dial(t, srv)
	c.open()
	tx = c.send("syslog", "<13>Jan  5 10:00:00 h app: "+strings.Repeat("L", 200))
	c.expect(tx, "rsp", "200 OK")
	tx = c.send("starttls", "")
	c.expect(tx, "rsp", "500")
	if got := sink.texts(); len(got) != 1 || !sink.got[0].Truncated || len(got[0]) > 64 {
		t.Fatalf("stored %q", got)
	}
	if got := testutil.ToFloat64(m.Rejected.WithLabelValues("relp", syslog.ReasonProtocol)); got != 4 {
		t.Fatalf("protocol errors counted %v, want 4", got)
	}
}

// TestShutdownSendsServerclose checks that a session open at shutdown
// gets its pending acknowledgements and a serverclose.
func TestShutdownSendsServerclose(t *testing.T) {
	srv, cancel := startServer(t, Config{}, &memSink{})
	c := dial(t, srv)
	c.open()
	c.expect(c.send("syslog", msg(1)), "rsp", "200 OK")
	cancel()
	c.expect(0, "serverclose", "")
}

// TestIdleSessionClosed checks the idle timeout of RELP sessions.
func TestIdleSessionClosed(t *testing.T) {
	m := syslog.NewMetrics(nil)
	srv, _ := startServer(t, Config{Metrics: m, Limits: syslog.Limits{IdleTimeout: 200 * time.Millisecond}}, &memSink{})
	c := dial(t, srv)
	c.open()
	if _, _, err := c.recv(); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("idle session: %v, want closed", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(m.ConnsClosed.WithLabelValues("relp", syslog.ReasonIdleTimeout)) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("idle close not counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
