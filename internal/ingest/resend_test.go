package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// cutter is a TCP proxy between a sender and a server that can hold the
// server's answers (acknowledgements) back and then cut every connection,
// as a network failure or a dying peer does.
type cutter struct {
	ln     net.Listener
	to     string
	hold   atomic.Bool // stop passing the server's answers on
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

func newCutter(t *testing.T, to string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln, to: to}
	go c.accept()
	t.Cleanup(func() {
		ln.Close()
		c.cut()
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	})
	return c
}

func (c *cutter) accept() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", c.to)
		if err != nil {
			in.Close()
			continue
		}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		c.conns = append(c.conns, in, out)
		c.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := out.Read(buf)
				if n > 0 && !c.hold.Load() {
					if _, err := in.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					in.Close()
					return
				}
			}
		}()
	}
}

// cut closes every connection at once.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

var resendDescs = func() []*metric.Desc {
	ds := make([]*metric.Desc, 50)
	for i := range ds {
		ds[i] = metric.NewDesc("node_resend_value", "Test.", metric.Gauge, "i", fmt.Sprint(i))
	}
	return ds
}()

// A sampler streams through connections that fail: first one cut while
// the server's acknowledgements were held back (ticks committed but not
// known to be), then the server itself stopped and started again. The
// ticks the sender could not know delivered are sent again on the next
// connection; the store takes the copies of committed ones as stored. In
// the end every tick is stored exactly once, and no gap is recorded or
// counted by either side.
func TestReconnectLosesNothing(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	quiet := slog.New(slog.DiscardHandler)
	h := NewWithOptions(st, Options{Interval: time.Hour, Logger: quiet})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serve := func(ln net.Listener) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = wire.Serve(ctx, ln, wire.ServerOptions{Log: quiet}, h) }()
		return func() { cancel(); <-done }
	}
	stopServer := serve(ln)
	px := newCutter(t, addr)

	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{px.ln.Addr().String()}, Name: "cn01", Log: quiet,
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	sink := c.Sink("cn01")(0)

	t0 := time.Now().Truncate(time.Second).Add(-5 * time.Minute)
	val := func(k, i int) float64 { return float64(k*1000+i) + 0.5 }
	var b metric.Batch
	sent := 0
	send := func(n int) {
		for range n {
			b.Reset(t0.Add(time.Duration(sent) * time.Second))
			for i, d := range resendDescs {
				b.Add(d, val(sent, i))
			}
			sink(&b)
			sent++
		}
	}
	stored := func(n int) func() bool { return func() bool { return h.Stats().Ticks.Load() >= uint64(n) } }

	send(20)
	waitFor(t, "first ticks stored", stored(20))
	// Acknowledgements held back: the server commits, the sender cannot
	// know. Then the connection is cut, with ticks queued meanwhile.
	px.hold.Store(true)
	send(20)
	waitFor(t, "ticks stored but not acknowledged", stored(40))
	px.cut()
	px.hold.Store(false)
	send(20)
	waitFor(t, "a new connection", func() bool { return c.Stats().Connects.Load() >= 2 })
	waitFor(t, "everything acknowledged", func() bool { return !c.DeliveredBefore().Before(time.Now().Add(-time.Millisecond)) })

	// The server stops (its connection with it) and comes back while
	// the sender keeps ticking.
	stopServer()
	send(20)
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	stopServer = serve(ln)
	defer func() { stopServer() }()
	send(20)
	waitFor(t, "everything acknowledged again", func() bool {
		return c.Stats().Connects.Load() >= 3 && !c.DeliveredBefore().Before(time.Now().Add(-time.Millisecond))
	})

	if d, q := c.Stats().Dropped.Load(), c.Stats().Ticks.Load(); d != 0 || q != uint64(sent) {
		t.Errorf("sender dropped %d ticks, queued %d of %d", d, q, sent)
	}
	if c.Stats().Resent.Load() == 0 {
		t.Error("no tick sent again: the test missed its point")
	}
	if g, e := h.Stats().Gaps.Load(), h.Stats().Errors.Load(); g != 0 || e != 0 {
		t.Errorf("ingest saw %d gaps and %d errors, want none", g, e)
	}
	if h.Stats().Ticks.Load() <= uint64(sent) {
		t.Errorf("ingest handled %d ticks for %d sent: no tick was sent again, the test missed its point", h.Stats().Ticks.Load(), sent)
	}
	// Every tick once, with its values.
	q, err := st.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "node_resend_value"))
	series := 0
	for set.Next() {
		s := set.At()
		var i int
		fmt.Sscan(s.Labels().Get("i"), &i)
		it := s.Iterator(nil)
		k := 0
		for ; it.Next() == chunkenc.ValFloat; k++ {
			ts, v := it.At()
			if want := t0.Add(time.Duration(k) * time.Second).UnixMilli(); ts != want || v != val(k, i) {
				t.Fatalf("%s sample %d: %d %v, want %d %v", s.Labels(), k, ts, v, want, val(k, i))
			}
		}
		if k != sent {
			t.Fatalf("%s: %d samples, want %d", s.Labels(), k, sent)
		}
		series++
	}
	if set.Err() != nil || series != len(resendDescs) {
		t.Fatalf("%d series (%v), want %d", series, set.Err(), len(resendDescs))
	}
}
