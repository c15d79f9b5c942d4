package ingest

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/wire"
)

var descs = func() []*metric.Desc {
	ds := make([]*metric.Desc, 3000)
	for i := range ds {
		ds[i] = metric.NewDesc("node_test_value", "Test.", metric.Gauge, "i", fmt.Sprint(i))
	}
	return ds
}()

// base is recent: the TSDB refuses samples far behind its newest.
var base = time.Now().Truncate(time.Second).Add(-10 * time.Minute)

// value is series i's value at tick k: random bits (splitmix64), so the
// wire and the WAL take about 8 bytes a sample and fill up quickly.
func value(k, i int) float64 {
	z := uint64(k)<<32 + uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53) * 1e6
}

func tick(k int) *metric.Batch {
	b := &metric.Batch{Time: base.Add(time.Duration(k) * time.Second)}
	for i, d := range descs {
		b.Add(d, value(k, i))
	}
	return b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	limit := 15 * time.Second
	if testutil.RaceEnabled { // the store is ~10 times slower
		limit *= 6
	}
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// pipeline is a sampler's client streaming into ingest over the wire.
type pipeline struct {
	st     *store.Store
	h      *Handler
	c      *wire.Client
	sink   func(*metric.Batch)
	cancel context.CancelFunc
	wg     sync.WaitGroup
	queued []time.Time // when tick k was queued
}

func startPipeline(t *testing.T, opts store.Options, copts ...wire.ClientOptions) *pipeline {
	st, err := store.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeline{st: st, h: New(st, time.Second, nil)}
	var co wire.ClientOptions
	if len(copts) > 0 {
		co = copts[0]
	}
	co.Addrs = []string{ln.Addr().String()}
	p.c, err = wire.NewClient(co)
	if err != nil {
		t.Fatal(err)
	}
	p.sink = p.c.Sink("cn01")(0)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.wg.Add(3)
	go func() { defer p.wg.Done(); p.h.Run(ctx) }()
	// Acks come every 10 ms at most, not every second: the tests send a
	// tick and wait for its Ack, many times.
	go func() {
		defer p.wg.Done()
		_ = wire.Serve(ctx, ln, wire.ServerOptions{AckInterval: 10 * time.Millisecond}, p.h)
	}()
	go func() { defer p.wg.Done(); _ = p.c.Run(ctx) }()
	return p
}

func (p *pipeline) send(k int) {
	p.sink(tick(k))
	p.queued = append(p.queued, time.Now()) // after the client's own stamp
}

// acked reports whether every tick up to k is acknowledged end to end.
func (p *pipeline) acked(k int) bool { return p.c.DeliveredBefore().After(p.queued[k]) }

func (p *pipeline) stop(t *testing.T) {
	p.cancel()
	p.wg.Wait()
	if err := p.st.Close(); err != nil {
		t.Logf("close store: %v", err)
	}
}

// checkStored fails unless ticks 0..n-1 are all stored.
func checkStored(t *testing.T, st *store.Store, n int) {
	t.Helper()
	q, err := st.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", "node_test_value"))
	got := 0
	for set.Next() {
		s := set.At()
		var i int
		fmt.Sscan(s.Labels().Get("i"), &i)
		it := s.Iterator(nil)
		for k := 0; it.Next() == chunkenc.ValFloat; k++ {
			ts, v := it.At()
			if want := base.Add(time.Duration(k) * time.Second).UnixMilli(); ts != want || v != value(k, i) {
				t.Fatalf("series %s sample %d: %d %v, want %d %v", s.Labels(), k, ts, v, want, value(k, i))
			}
			got++
		}
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	if want := n * len(descs); got != want {
		t.Fatalf("%d samples stored, want %d (%d ticks)", got, want, n)
	}
}

// A sender streams while the server's disk fills: acknowledgements stop
// while the store cannot write, nothing is dropped or turned into a gap,
// and everything is stored once space returns, also after a restart.
func TestDiskFullHoldsStreamThenResumes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		minFree int64 // the store's watermark; -1: writes fail for real
		slack   int64 // space left free after filling
	}{
		{"watermark", 8 << 20, 4 << 20},
		{"failed write", -1, 600 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testutil.TmpFS(t, 32<<20)
			opts := store.Options{Dir: dir, MinFreeBytes: tc.minFree, CheckInterval: 10 * time.Millisecond}
			p := startPipeline(t, opts)
			n := 0
			for ; n < 5; n++ {
				p.send(n)
			}
			waitFor(t, "first ticks acknowledged", func() bool { return p.acked(n - 1) })
			filler := testutil.Fill(t, dir, "filler")
			st, _ := os.Stat(filler)
			if err := os.Truncate(filler, st.Size()-tc.slack); err != nil {
				t.Fatal(err)
			}
			// Stream until the store stops taking ticks.
			for ; p.h.holding.Load() == 0; n++ {
				if n > 200 {
					t.Fatal("200 ticks acknowledged on a full disk")
				}
				p.send(n)
				waitFor(t, "tick handled or held", func() bool { return p.acked(n) || p.h.holding.Load() > 0 })
			}
			held := n - 1
			if p.acked(held) {
				t.Fatalf("tick %d acknowledged while the store cannot write", held)
			}
			for end := n + 5; n < end; n++ {
				p.send(n)
			}
			if err := p.st.Writable(); err == nil {
				t.Fatal("store writable on a full disk")
			}
			if p.acked(held) {
				t.Fatalf("tick %d acknowledged while the store cannot write", held)
			}
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "acknowledgements after space returned", func() bool { return p.acked(n - 1) })
			if d := p.c.Stats().Dropped.Load(); d != 0 {
				t.Errorf("sender dropped %d ticks (reported as gaps)", d)
			}
			checkStored(t, p.st, n)
			p.stop(t)
			st2, err := store.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			checkStored(t, st2, n)
		})
	}
}

// Held longer than its write timeout, with the socket buffers full, the
// sender waits rather than dropping the connection (which would turn its
// unacknowledged ticks into gaps): the server repeats its last Ack.
func TestLongHoldKeepsConnection(t *testing.T) {
	dir := testutil.TmpFS(t, 96<<20)
	opts := store.Options{Dir: dir, MinFreeBytes: 8 << 20, CheckInterval: 10 * time.Millisecond}
	const writeTimeout = 4 * time.Second
	p := startPipeline(t, opts, wire.ClientOptions{WriteTimeout: writeTimeout, MaxQueueBytes: 256 << 20})
	p.send(0)
	waitFor(t, "first tick acknowledged", func() bool { return p.acked(0) })
	filler := testutil.Fill(t, dir, "filler")
	waitFor(t, "read-only", func() bool { return p.st.Writable() != nil })
	// Send until the socket buffers are full and ticks queue up at the
	// sender: its write is blocked.
	n := 1
	for ; p.c.QueueBytes() < 4<<20; n++ {
		if n > 5000 {
			t.Fatal("sender's writes never blocked")
		}
		p.send(n)
		if n%20 == 0 {
			time.Sleep(time.Millisecond) // let the writer catch up
		}
	}
	t.Logf("%d ticks sent, %d bytes queued at the sender", n, p.c.QueueBytes())
	waitFor(t, "held", func() bool { return p.h.holding.Load() > 0 })
	// Hold past the sender's write timeout while its writes are blocked.
	time.Sleep(writeTimeout + writeTimeout/2)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all acknowledged", func() bool { return p.acked(n - 1) })
	if c, d := p.c.Stats().Connects.Load(), p.c.Stats().Dropped.Load(); c != 1 || d != 0 {
		t.Errorf("sender connected %d times and dropped %d ticks; want 1 and 0", c, d)
	}
	checkStored(t, p.st, n)
	p.stop(t)
}
