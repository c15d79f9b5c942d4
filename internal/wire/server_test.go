package wire_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// syncBuf is a log sink safe for the server's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type server struct {
	addr  string
	stats *wire.ServerStats
	rec   *recorder
	log   *syncBuf
	stop  func()
}

// startServer serves on addr ("" = a free loopback port) until the test ends.
func startServer(t *testing.T, addr string, key []byte) *server {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{addr: ln.Addr().String(), stats: &wire.ServerStats{}, rec: &recorder{}, log: &syncBuf{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		opts := wire.ServerOptions{Key: key, Name: "test-agg", Stats: s.stats,
			Log: slog.New(slog.NewTextHandler(s.log, nil)), HandshakeTimeout: 2 * time.Second}
		if err := wire.Serve(ctx, ln, opts, s.rec); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(s.stop)
	return s
}

func startClient(t *testing.T, o wire.ClientOptions) *wire.Client {
	t.Helper()
	o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	c, err := wire.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (r *recorder) tickCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ticks)
}

// sendTicks samples node n ticks times through c and returns the batches sent.
func sendTicks(c *wire.Client, cs *wire.ClientStream, n *simulate.Node, t0 time.Time, from, ticks int) []metric.Batch {
	var sent []metric.Batch
	for i := from; i < from+ticks; i++ {
		var b metric.Batch
		b.Reset(t0.Add(time.Duration(i) * time.Second))
		n.Sample(b.Time, time.Second, &b)
		c.Tick(cs, b.Time, b.Descs, b.Values)
		sent = append(sent, b)
	}
	return sent
}

var testKey = []byte("0123456789abcdef-test-key")

func TestClientServerWithKey(t *testing.T) {
	srv := startServer(t, "", testKey)
	c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Key: testKey, Name: "cn00001"})
	n := simulate.NewNode("cn00001", simulate.NewSchema(4), 7)
	cs := c.NewStream("cn00001")
	sent := sendTicks(c, cs, n, time.Unix(1_763_800_000, 0), 0, 5)
	waitFor(t, "5 ticks", func() bool { return srv.rec.tickCount() == 5 })
	for i, tk := range srv.rec.ticks {
		checkTick(t, tk, "cn00001", &sent[i])
	}
	if srv.stats.AuthFailures.Load() != 0 || srv.stats.ProtocolErrors.Load() != 0 || c.Stats().Connects.Load() != 1 {
		t.Errorf("auth failures %d, protocol errors %d, connects %d", srv.stats.AuthFailures.Load(),
			srv.stats.ProtocolErrors.Load(), c.Stats().Connects.Load())
	}
	if srv.stats.Values.Load() != uint64(5*sent[0].Len()) {
		t.Errorf("server counted %d values, want %d", srv.stats.Values.Load(), 5*sent[0].Len())
	}
}

func TestAuthFailures(t *testing.T) {
	cases := []struct {
		name           string
		server, client []byte
		log            string // in the server's log
	}{
		{"wrong key", testKey, []byte("another-key-of-16-bytes"), "peer failed authentication"},
		{"client without key", testKey, nil, "has no key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, "", tc.server)
			c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Key: tc.client, Name: "intruder"})
			c.Tick(c.NewStream("cn1"), time.Time{}, nil, nil)
			waitFor(t, "refusals", func() bool {
				return srv.stats.AuthFailures.Load() >= 2 && c.Stats().DialFailures.Load() >= 2
			})
			if c.Stats().Connects.Load() != 0 || srv.rec.conns != 0 || srv.rec.tickCount() != 0 {
				t.Errorf("connected anyway: %d connects, %d handler connects", c.Stats().Connects.Load(), srv.rec.conns)
			}
			if !strings.Contains(srv.log.String(), tc.log) {
				t.Errorf("server log lacks %q:\n%s", tc.log, srv.log.String())
			}
		})
	}
	// A keyed client will not stream to a server that cannot prove the key.
	t.Run("server without key", func(t *testing.T) {
		srv := startServer(t, "", nil)
		c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Key: testKey, Name: "cn1"})
		c.Tick(c.NewStream("cn1"), time.Time{}, nil, nil)
		waitFor(t, "refusals", func() bool { return c.Stats().DialFailures.Load() >= 2 })
		if c.Stats().Connects.Load() != 0 || srv.rec.tickCount() != 0 || srv.rec.schemas != 0 {
			t.Errorf("streamed anyway: %d connects", c.Stats().Connects.Load())
		}
	})
}

// Random bytes close that connection, are counted, and others go on.
func TestGarbageClient(t *testing.T) {
	srv := startServer(t, "", nil)
	waitFor(t, "notice about loopback-only mode", func() bool {
		return strings.Contains(srv.log.String(), "loopback peers only")
	})
	rng := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	send := func(handshake bool, data []byte) {
		conn, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if handshake {
			fr := wire.NewFrameReader(bufio.NewReader(conn), 0)
			if _, err := wire.ClientHandshake(conn, fr, nil, "junk"); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = conn.Write(data)
		// The server must close on us (after saying why, once handshaken).
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		rest, err := io.ReadAll(conn)
		if isTimeout(err) {
			t.Errorf("server did not close the connection")
		}
		if handshake && !bytes.Contains(rest, []byte("malformed")) && !bytes.Contains(rest, []byte("unknown frame")) &&
			!bytes.Contains(rest, []byte("larger than")) && !bytes.Contains(rest, []byte("checksum")) && !bytes.Contains(rest, []byte("version")) {
			t.Errorf("no reason given before closing: %q", rest)
		}
	}
	send(false, junk)
	send(true, junk)
	send(true, wire.AppendFrame(nil, 200, []byte("unknown frame type")))
	waitFor(t, "3 protocol errors", func() bool { return srv.stats.ProtocolErrors.Load() == 3 })

	c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "good"})
	n := simulate.NewNode("cn00002", simulate.NewSchema(2), 3)
	sendTicks(c, c.NewStream("cn00002"), n, time.Unix(1_763_800_000, 0), 0, 3)
	waitFor(t, "good client's ticks", func() bool { return srv.rec.tickCount() == 3 })
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// The first address is down: the client uses the second. When that server
// restarts, the client reconnects and sends its schema again.
func TestFailoverAndReconnect(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	srv := startServer(t, "", testKey)
	c := startClient(t, wire.ClientOptions{Addrs: []string{deadAddr, srv.addr}, Key: testKey, Name: "cn00003"})
	n := simulate.NewNode("cn00003", simulate.NewSchema(2), 5)
	cs := c.NewStream("cn00003")
	t0 := time.Unix(1_763_800_000, 0)
	sendTicks(c, cs, n, t0, 0, 3)
	waitFor(t, "ticks on the second address", func() bool { return srv.rec.tickCount() == 3 })

	srv.stop()
	waitFor(t, "client to notice", func() bool { return !c.Stats().Connected.Load() })
	srv2 := startServer(t, srv.addr, testKey)
	sent := sendTicks(c, cs, n, t0, 3, 3)
	waitFor(t, "ticks after reconnecting", func() bool { return srv2.rec.tickCount() == 3 })
	if srv2.rec.schemas == 0 || srv2.stats.ProtocolErrors.Load() != 0 {
		t.Errorf("after reconnect: %d schemas, %d protocol errors", srv2.rec.schemas, srv2.stats.ProtocolErrors.Load())
	}
	for i, tk := range srv2.rec.ticks {
		checkTick(t, tk, "cn00003", &sent[i])
	}
}

// TestCoalescedTicksGoOnReconnect: a tick waiting to share a write stays
// queued, not lost, when the connection goes, and the next connection
// writes it at once.
func TestCoalescedTicksGoOnReconnect(t *testing.T) {
	srv := startServer(t, "", nil)
	c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn00007", Coalesce: time.Hour})
	waitFor(t, "connection", func() bool { return c.Stats().Connected.Load() })
	n := simulate.NewNode("cn00007", simulate.NewSchema(2), 5)
	cs := c.NewStream("cn00007")
	t0 := time.Unix(1_763_800_000, 0)
	sent := sendTicks(c, cs, n, t0, 0, 1)
	waitFor(t, "the first tick", func() bool { return srv.rec.tickCount() == 1 })
	sent = append(sent, sendTicks(c, cs, n, t0, 1, 1)...)
	time.Sleep(100 * time.Millisecond)
	if got := srv.rec.tickCount(); got != 1 {
		t.Fatalf("%d ticks written, want the first only (the second waits)", got)
	}
	srv.stop()
	waitFor(t, "client to notice", func() bool { return !c.Stats().Connected.Load() })
	srv2 := startServer(t, srv.addr, nil)
	waitFor(t, "the waiting tick after reconnecting", func() bool { return srv2.rec.tickCount() >= 1 })
	srv2.rec.mu.Lock()
	defer srv2.rec.mu.Unlock()
	checkTick(t, srv2.rec.ticks[len(srv2.rec.ticks)-1], "cn00007", &sent[1])
}

// With the upstream down and a queue too small for two ticks, the oldest
// ticks are dropped, counted, and reported as one gap when the stream
// resumes; the newest tick arrives.
func TestQueueFullReportsGap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := startClient(t, wire.ClientOptions{Addrs: []string{addr}, Name: "cn00004", MaxQueueBytes: 1})
	n := simulate.NewNode("cn00004", simulate.NewSchema(2), 9)
	cs := c.NewStream("cn00004")
	t0 := time.Unix(1_763_800_000, 0)
	sent := sendTicks(c, cs, n, t0, 0, 5) // each tick pushes out the one before
	if d := c.Stats().Dropped.Load(); d != 4 {
		t.Fatalf("dropped %d ticks, want 4", d)
	}
	srv := startServer(t, addr, nil)
	waitFor(t, "queued tick", func() bool { return srv.rec.tickCount() == 1 })
	sent = append(sent, sendTicks(c, cs, n, t0, 5, 1)...)
	waitFor(t, "next tick", func() bool { return srv.rec.tickCount() == 2 })
	srv.rec.mu.Lock()
	defer srv.rec.mu.Unlock()
	checkTick(t, srv.rec.ticks[0], "cn00004", &sent[4])
	checkTick(t, srv.rec.ticks[1], "cn00004", &sent[5])
	want := gap{"cn00004", t0, t0.Add(3 * time.Second)}
	if len(srv.rec.gaps) != 1 || srv.rec.gaps[0] != want {
		t.Errorf("gaps %v, want %v", srv.rec.gaps, want)
	}
}

// A sampler whose plugins tick at two intervals sends two batches with
// different series; the Sink keeps a stream for each, so the schema is not
// sent again on every tick.
func TestSinkStreamsPerGroup(t *testing.T) {
	srv := startServer(t, "", nil)
	c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn00005"})
	sinks := c.Sink("cn00005")
	fast := []*metric.Desc{metric.NewDesc("node_load1", "", metric.Gauge)}
	slow := []*metric.Desc{metric.NewDesc("node_filesystem_free_bytes", "", metric.Gauge, "mountpoint", "/"),
		metric.NewDesc("node_filesystem_free_bytes", "", metric.Gauge, "mountpoint", "/scratch")}
	sink := []func(*metric.Batch){sinks(0), sinks(1)}
	t0 := time.Unix(1_763_800_000, 0)
	for i := range 10 {
		for g, ds := range [][]*metric.Desc{fast, slow} {
			var b metric.Batch
			b.Reset(t0.Add(time.Duration(i) * time.Second))
			for k, d := range ds {
				b.Add(d, float64(i*k))
			}
			sink[g](&b)
		}
	}
	waitFor(t, "20 ticks", func() bool { return srv.rec.tickCount() == 20 })
	if srv.rec.schemas != 2 {
		t.Errorf("%d schemas for two steady groups, want 2", srv.rec.schemas)
	}
}

// On shutdown a client writes what it has queued and closes cleanly.
func TestClientFlushesOnStop(t *testing.T) {
	// With Coalesce all but the first of the 50 back-to-back ticks are
	// still held when the client stops.
	for _, coalesce := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("coalesce=", coalesce), func(t *testing.T) { flushesOnStop(t, coalesce) })
	}
}

func flushesOnStop(t *testing.T, coalesce time.Duration) {
	srv := startServer(t, "", nil)
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn00006", Log: slog.New(slog.DiscardHandler), Coalesce: coalesce})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	waitFor(t, "connection", func() bool { return c.Stats().Connected.Load() })
	n := simulate.NewNode("cn00006", simulate.NewSchema(2), 1)
	sendTicks(c, c.NewStream("cn00006"), n, time.Unix(1_763_800_000, 0), 0, 50)
	cancel()
	<-done
	waitFor(t, "all 50 ticks", func() bool { return srv.rec.tickCount() == 50 })
	waitFor(t, "clean disconnect", func() bool {
		srv.rec.mu.Lock()
		defer srv.rec.mu.Unlock()
		return len(srv.rec.discErr) == 1 && srv.rec.discErr[0] == nil
	})
}
