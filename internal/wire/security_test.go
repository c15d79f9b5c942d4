package wire_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/internal/wire/wiremetrics"
)

// serve runs Serve with opts on a free loopback port until the test ends.
func serve(t *testing.T, opts wire.ServerOptions) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{addr: ln.Addr().String(), stats: &wire.ServerStats{}, rec: &recorder{}, log: &syncBuf{}}
	opts.Stats = s.stats
	opts.Log = slog.New(slog.NewTextHandler(s.log, nil))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := wire.Serve(ctx, ln, opts, s.rec); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(s.stop)
	return s
}

// closedByPeer reads conn until the far end closes it; false on a timeout.
func closedByPeer(conn net.Conn, within time.Duration) ([]byte, bool) {
	_ = conn.SetReadDeadline(time.Now().Add(within))
	b, err := io.ReadAll(conn)
	return b, !isTimeout(err)
}

// 150 unauthenticated connections each announcing a 16 MiB hello and
// sending 256 KiB of it: each is closed at its header, and the server
// allocates a few KiB for each (it used to buffer what was sent, up to 16
// MiB a connection).
func TestUnauthenticatedConnectionsCostLittle(t *testing.T) {
	srv := serve(t, wire.ServerOptions{Key: testKey, Name: "agg", MaxHandshakesPerSource: 1000})
	const conns = 150
	hdr := []byte{0x00, 0xff, 0xff, 0xff, wire.Version, 1}
	body := make([]byte, 256<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	var closed atomic.Int64
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", srv.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			if _, err := conn.Write(hdr); err != nil {
				return
			}
			_, _ = conn.Write(body) // fails once the server hangs up
			if _, ok := closedByPeer(conn, 5*time.Second); ok {
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	waitFor(t, "all counted and gone", func() bool {
		return srv.stats.HandshakeTooLarge.Load() == conns && srv.stats.Handshaking.Load() == 0
	})
	runtime.ReadMemStats(&after)
	if closed.Load() != conns {
		t.Errorf("%d of %d connections closed by the server", closed.Load(), conns)
	}
	// Client and server side together: a dial, a goroutine, small buffers.
	if d := after.TotalAlloc - before.TotalAlloc; d > conns*24<<10 {
		t.Errorf("allocated %d KiB for %d unauthenticated connections, want at most 24 KiB each", d>>10, conns)
	}
	srv.rec.mu.Lock()
	defer srv.rec.mu.Unlock()
	if srv.rec.conns != 0 {
		t.Errorf("%d handler connects", srv.rec.conns)
	}
}

// holdOpen opens a connection from local address from (nil: any) that
// stays in the handshake.
func holdOpen(t *testing.T, addr string, from net.IP) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if from != nil {
		d.LocalAddr = &net.TCPAddr{IP: from}
	}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// refused checks that a new connection from from is closed at once with
// reason in the Close frame.
func refused(t *testing.T, addr string, from net.IP, reason string) {
	t.Helper()
	conn := holdOpen(t, addr, from)
	b, ok := closedByPeer(conn, 5*time.Second)
	if !ok || !bytes.Contains(b, []byte(reason)) {
		t.Errorf("from %v: closed %v, got %q, want a Close saying %q", from, ok, b, reason)
	}
}

func TestConnectionCaps(t *testing.T) {
	lo2 := net.IPv4(127, 0, 0, 2) // Linux answers all of 127/8 on lo
	t.Run("handshakes per source", func(t *testing.T) {
		srv := serve(t, wire.ServerOptions{Key: testKey, MaxHandshakesPerSource: 3})
		// An authenticated peer no longer counts against the cap.
		c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Key: testKey, Name: "cn1"})
		waitFor(t, "keyed client", func() bool { return c.Stats().Connected.Load() })
		for range 3 {
			holdOpen(t, srv.addr, nil)
		}
		waitFor(t, "3 in the handshake", func() bool { return srv.stats.Handshaking.Load() == 3 })
		for range 5 {
			refused(t, srv.addr, nil, "handshake per source address")
		}
		holdOpen(t, srv.addr, lo2) // another source is not affected
		waitFor(t, "the other source admitted", func() bool { return srv.stats.Handshaking.Load() == 4 })
		sendTicks(c, c.NewStream("cn1"), simulate.NewNode("cn1", simulate.NewSchema(1), 1), time.Unix(1_763_800_000, 0), 0, 1)
		waitFor(t, "the keyed client's tick", func() bool { return srv.rec.tickCount() == 1 })
		if got := srv.stats.RejectedSourceHandshakes.Load(); got != 5 {
			t.Errorf("%d rejections counted, want 5", got)
		}
		if n := strings.Count(srv.log.String(), "refusing connections"); n != 1 {
			t.Errorf("%d log lines for 5 rejections from one source, want 1:\n%s", n, srv.log.String())
		}
	})
	t.Run("connections per source", func(t *testing.T) {
		srv := serve(t, wire.ServerOptions{MaxConnsPerSource: 2})
		c1 := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn1"})
		c2 := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn2"})
		waitFor(t, "2 clients", func() bool { return c1.Stats().Connected.Load() && c2.Stats().Connected.Load() })
		refused(t, srv.addr, nil, "per source address")
		holdOpen(t, srv.addr, lo2)
		waitFor(t, "the other source admitted", func() bool { return srv.stats.Handshaking.Load() == 1 })
		if srv.stats.RejectedSource.Load() != 1 {
			t.Errorf("rejected %d, want 1", srv.stats.RejectedSource.Load())
		}
	})
	t.Run("listener", func(t *testing.T) {
		srv := serve(t, wire.ServerOptions{MaxConns: 2, HandshakeTimeout: time.Second})
		holdOpen(t, srv.addr, nil)
		holdOpen(t, srv.addr, lo2)
		waitFor(t, "2 in the handshake", func() bool { return srv.stats.Handshaking.Load() == 2 })
		refused(t, srv.addr, net.IPv4(127, 0, 0, 3), "limit of the listener")
		// The handshake deadline frees the slots for a real client.
		c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn1"})
		waitFor(t, "client in after the deadline", func() bool { return c.Stats().Connected.Load() })
		waitFor(t, "both handshake timeouts counted", func() bool { return srv.stats.ProtocolErrors.Load() == 2 })
		if srv.stats.RejectedConns.Load() < 1 {
			t.Errorf("rejected %d, want at least 1", srv.stats.RejectedConns.Load())
		}
	})
}

// mitm relays a client's connection to addr, parsing the client's frames:
// the first two (hello, auth) are checksummed, the rest tagged. After the
// handshake it writes inject to the server, then each client frame i as
// edit returns it (nil edit: unchanged). toClient is written to the client
// after the server's Ready. Only the first connection is tampered with.
type mitm struct {
	addr     string
	inject   []byte
	edit     func(i int, frame []byte, prev [][]byte) [][]byte
	toClient []byte
	conns    atomic.Int64
}

func (m *mitm) start(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", m.addr)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); s.Close() })
			first := m.conns.Add(1) == 1
			go func() {
				if first && m.toClient != nil {
					m.relayToClient(s, c)
				}
				_, _ = io.Copy(c, s)
				c.Close()
			}()
			go func() { m.relay(c, s, first); s.Close() }()
		}
	}()
	return ln.Addr().String()
}

// relayToClient passes the server's hello (checksummed) and Ready (tagged)
// on, then injects toClient.
func (m *mitm) relayToClient(s, c net.Conn) {
	for _, trailer := range []int{4, 16} {
		hdr := make([]byte, 6)
		if _, err := io.ReadFull(s, hdr); err != nil {
			return
		}
		frame := make([]byte, 6+int(binary.BigEndian.Uint32(hdr))+trailer)
		copy(frame, hdr)
		if _, err := io.ReadFull(s, frame[6:]); err != nil {
			return
		}
		if _, err := c.Write(frame); err != nil {
			return
		}
	}
	_, _ = c.Write(m.toClient)
}

func (m *mitm) relay(c, s net.Conn, tamper bool) {
	var prev [][]byte
	for i := 0; ; i++ {
		hdr := make([]byte, 6)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		trailer := 16
		if i < 2 {
			trailer = 4
		}
		frame := make([]byte, 6+int(binary.BigEndian.Uint32(hdr))+trailer)
		copy(frame, hdr)
		if _, err := io.ReadFull(c, frame[6:]); err != nil {
			return
		}
		out := [][]byte{frame}
		if tamper && i >= 2 && m.edit != nil {
			out = m.edit(i-2, frame, prev)
		}
		prev = append(prev, frame)
		for _, f := range out {
			if _, err := s.Write(f); err != nil {
				return
			}
		}
		if tamper && i == 1 && m.inject != nil {
			if _, err := s.Write(m.inject); err != nil {
				return
			}
		}
	}
}

// Frames spliced into a keyed session are rejected and the connection is
// closed before they reach the handler: a forged NodeState(down), with a
// made-up tag or a checksum as before authentication existed, a replayed
// or a reordered frame. The client reconnects and streams on.
func TestInjectedFramesRejected(t *testing.T) {
	down := wire.AppendNodeState(nil, "cn00001", false, time.Unix(1_763_800_000, 0))
	forged := append(bytes.Clone(down[:len(down)-4]), bytes.Repeat([]byte{0x5a}, 16)...)
	type edit = func(i int, f []byte, prev [][]byte) [][]byte
	cases := []struct {
		name   string
		inject []byte
		edit   edit
	}{
		{"forged tag", forged, nil},
		{"checksummed frame", down, nil},
		{"replayed frame", nil, func(i int, f []byte, prev [][]byte) [][]byte {
			if i == 3 {
				return [][]byte{f, prev[len(prev)-1]}
			}
			return [][]byte{f}
		}},
		{"reordered frames", nil, func(i int, f []byte, prev [][]byte) [][]byte {
			switch i {
			case 2:
				return nil // held back
			case 3:
				return [][]byte{f, prev[len(prev)-1]}
			}
			return [][]byte{f}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, "", testKey)
			m := &mitm{addr: srv.addr, inject: tc.inject, edit: tc.edit}
			proxy := m.start(t)
			c := startClient(t, wire.ClientOptions{Addrs: []string{proxy}, Key: testKey, Name: "cn00001"})
			n := simulate.NewNode("cn00001", simulate.NewSchema(1), 1)
			cs := c.NewStream("cn00001")
			t0 := time.Unix(1_763_800_000, 0)
			for i := 0; srv.stats.FrameAuthFailures.Load() == 0; i++ {
				if i == 500 {
					t.Fatal("no frame failed authentication")
				}
				sendTicks(c, cs, n, t0, i, 1)
				time.Sleep(2 * time.Millisecond)
			}
			waitFor(t, "reconnect", func() bool { return c.Stats().Connects.Load() >= 2 })
			before := srv.rec.tickCount()
			sendTicks(c, cs, n, t0, 1000, 3)
			waitFor(t, "ticks after reconnecting", func() bool { return srv.rec.tickCount() >= before+3 })
			srv.rec.mu.Lock()
			defer srv.rec.mu.Unlock()
			for _, s := range srv.rec.states {
				t.Errorf("injected node state reached the handler: %+v", s)
			}
			if len(srv.rec.discErr) == 0 || !errors.Is(srv.rec.discErr[0], wire.ErrFrameAuth) {
				t.Errorf("first connection ended with %v, want %v", srv.rec.discErr, wire.ErrFrameAuth)
			}
			if !strings.Contains(srv.log.String(), "failed authentication") {
				t.Errorf("server log does not say why:\n%s", srv.log.String())
			}
		})
	}
}

// A forged acknowledgement (which would make the client forget unsent
// ticks) spliced into the server's side fails its tag: the client drops
// the connection and reconnects.
func TestInjectedAckRejected(t *testing.T) {
	ack := wire.AppendFrame(nil, 6, binary.AppendUvarint(nil, 1<<40))
	forged := append(bytes.Clone(ack[:len(ack)-4]), bytes.Repeat([]byte{0x5a}, 16)...)
	srv := startServer(t, "", testKey)
	m := &mitm{addr: srv.addr, toClient: forged}
	proxy := m.start(t)
	c := startClient(t, wire.ClientOptions{Addrs: []string{proxy}, Key: testKey, Name: "cn1"})
	waitFor(t, "reconnect", func() bool { return c.Stats().Connects.Load() >= 2 })
	n := simulate.NewNode("cn1", simulate.NewSchema(1), 1)
	sendTicks(c, c.NewStream("cn1"), n, time.Unix(1_763_800_000, 0), 0, 3)
	waitFor(t, "ticks on the second connection", func() bool { return srv.rec.tickCount() == 3 })
}

// A keyed session carries acknowledgements back (tagged too), so the
// client learns its ticks were handled.
func TestKeyedAcks(t *testing.T) {
	srv := startServer(t, "", testKey)
	c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Key: testKey, Name: "cn1"})
	waitFor(t, "connection", func() bool { return c.Stats().Connected.Load() })
	sendTicks(c, c.NewStream("cn1"), simulate.NewNode("cn1", simulate.NewSchema(2), 1), time.Unix(1_763_800_000, 0), 0, 20)
	// Until the last tick is acknowledged, DeliveredBefore is no later
	// than when the oldest unacknowledged tick was queued.
	sent := time.Now()
	waitFor(t, "acknowledged", func() bool { return c.DeliveredBefore().After(sent) })
	if srv.rec.tickCount() != 20 || c.Stats().Connects.Load() != 1 {
		t.Errorf("%d ticks, %d connects", srv.rec.tickCount(), c.Stats().Connects.Load())
	}
}

// A sender of protocol 1 is told why it is refused.
func TestOldVersionToldWhy(t *testing.T) {
	srv := startServer(t, "", nil)
	conn := holdOpen(t, srv.addr, nil)
	hello := wire.AppendFrame(nil, 1, append([]byte{0}, make([]byte, 33)...))
	hello[4] = 1
	if _, err := conn.Write(hello); err != nil {
		t.Fatal(err)
	}
	b, ok := closedByPeer(conn, 5*time.Second)
	if !ok || len(b) < 6 || b[4] != 1 || !bytes.Contains(b, []byte("upgrade the sender")) {
		t.Errorf("closed %v, got %q; want a version 1 Close", ok, b)
	}
}

// The counters are exported through a client_golang registry while Serve
// runs.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	srv := serve(t, wire.ServerOptions{Key: testKey, Metrics: wiremetrics.New(reg), MaxHandshakesPerSource: 1})
	holdOpen(t, srv.addr, nil)
	waitFor(t, "1 in the handshake", func() bool { return srv.stats.Handshaking.Load() == 1 })
	refused(t, srv.addr, nil, "per source")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "/" + l.GetValue()
			}
			got[name] = value(m)
		}
	}
	for name, want := range map[string]float64{
		"vigil_wire_connections_accepted_total":                        1,
		"vigil_wire_handshakes":                                        1,
		"vigil_wire_connections_rejected_total/source_handshake_limit": 1,
		"vigil_wire_connections_rejected_total/not_loopback":           0,
		"vigil_wire_frame_auth_failures_total":                         0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	// Serve unregisters when it returns, so a restart can register again.
	srv.stop()
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("%d metric families left after Serve returned", len(mfs))
	}
}

func value(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}
