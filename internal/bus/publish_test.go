package bus

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/testutil/rabbitmq"
)

func msgOf(n int, size int) outMsg {
	p := getBody()
	body := append((*p)[:0], make([]byte, size)...)
	body[0] = byte(n)
	return outMsg{stream: StreamMetrics, seq: uint64(n), body: body, pooled: p}
}

// The ring keeps the newest messages within both bounds, oldest first.
func TestRingDropsOldest(t *testing.T) {
	r := newRing(4, 1000)
	for i := 1; i <= 6; i++ {
		if d, rej := r.push(msgOf(i, 10)); rej || d != min(1, max(0, i-4)) {
			t.Fatalf("push %d: dropped %d, rejected %v; want %d, false", i, d, rej, min(1, max(0, i-4)))
		}
	}
	got := r.take(nil, 10, 1<<20)
	if len(got) != 4 || got[0].seq != 3 || got[3].seq != 6 || r.len() != 0 || r.bytes != 0 {
		t.Fatalf("took %d messages from %d, left %d (%d bytes); want 3..6, none left", len(got), got[0].seq, r.len(), r.bytes)
	}
	// By bytes: 400-byte bodies, 1000 bytes at most.
	for i := 1; i <= 3; i++ {
		r.push(msgOf(i, 400))
	}
	if r.len() != 2 || r.bytes != 800 {
		t.Fatalf("3 × 400 bytes into 1000: %d held, %d bytes; want 2, 800", r.len(), r.bytes)
	}
	if _, rej := r.push(msgOf(9, 2000)); !rej {
		t.Fatal("a body larger than the whole bound was taken")
	}
	// take stops at its byte bound (but takes one).
	if got := r.take(nil, 10, 100); len(got) != 1 || got[0].seq != 2 {
		t.Fatalf("take with a 100-byte bound: %d messages", len(got))
	}
	// A push into an empty ring wakes the publisher once.
	r.take(nil, 10, 1<<20)
	select {
	case <-r.wake:
	default:
	}
	r.push(msgOf(1, 1))
	r.push(msgOf(2, 1))
	if len(r.wake) != 1 {
		t.Fatalf("%d wake-ups queued, want 1", len(r.wake))
	}
}

// countConn records the writes made to it.
type countConn struct {
	net.Conn
	writes [][]byte
	fail   error
	closed bool
}

func (c *countConn) Write(p []byte) (int, error) {
	if c.fail != nil {
		return 0, c.fail
	}
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (c *countConn) Close() error { c.closed = true; return nil }

// A corked connection writes a batch in one go, in order, and passes
// other writes straight through; a failed write ends it.
func TestCorkConn(t *testing.T) {
	under := &countConn{}
	c := &corkConn{Conn: under, writes: prometheus.NewCounter(prometheus.CounterOpts{Name: "w"})}
	c.Write([]byte("hb"))
	c.cork()
	for _, s := range []string{"a", "bb", "ccc"} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("corked write %q: %d, %v", s, n, err)
		}
	}
	if len(under.writes) != 1 {
		t.Fatalf("%d writes reached the socket while corked, want only the first", len(under.writes))
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if len(under.writes) != 2 || string(under.writes[1]) != "abbccc" {
		t.Fatalf("socket got %q, want [hb abbccc]", under.writes)
	}
	// A corked batch larger than corkMax goes out as it grows.
	c.cork()
	big := bytes.Repeat([]byte("x"), corkMax/3+1)
	for range 3 {
		c.Write(big)
	}
	if len(under.writes) != 3 {
		t.Fatalf("%d writes after 3 × corkMax/3 corked, want one more", len(under.writes))
	}
	c.uncork()
	if got := testutil.ToFloat64(c.writes); got != float64(len(under.writes)) {
		t.Errorf("writes counted %v, made %d", got, len(under.writes))
	}
	under.fail = errors.New("broken pipe")
	c.cork()
	c.Write([]byte("lost"))
	if err := c.uncork(); err == nil || !under.closed {
		t.Fatalf("uncork after a failed write: %v, closed %v", err, under.closed)
	}
	if _, err := c.Write([]byte("later")); err == nil {
		t.Fatal("a write after the failure succeeded")
	}
}

// TestMetricsBurst publishes 20,000 distinct ticks as fast as they come
// (recycled bodies, batches, corked writes): every one arrives once, in
// order and intact, is confirmed, and the batches need far fewer socket
// writes than messages.
func TestMetricsBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rabbitmq-server")
	}
	const nodes, ticks = 200, 100
	br := rabbitmq.Start(t)
	url := br.URL("guest", "guest")
	durableQueue(t, url, "burst", "metrics.#")
	b, err := New(Config{URL: url}, Options{DataDir: t.TempDir(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for testutil.ToFloat64(b.m.connected) != 1 {
		time.Sleep(20 * time.Millisecond)
	}
	w0 := testutil.ToFloat64(b.m.writes)

	descs := []*metric.Desc{metric.NewDesc("a", "", metric.Gauge), metric.NewDesc("b", "", metric.Counter), metric.NewDesc("c", "", metric.Gauge)}
	names := make([]string, nodes)
	for i := range names {
		names[i] = simulate.NodeName(i + 1)
	}
	t0 := time.UnixMilli(1.7e12)
	values := make([]float64, len(descs))
	for i := range nodes * ticks {
		values[0], values[1], values[2] = float64(i), float64(i%nodes), float64(i)/3
		b.Tick(names[i%nodes], t0.Add(time.Duration(i/nodes)*time.Second), descs, values)
	}

	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	ds, err := ch.Consume("burst", "", true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for i := range nodes * ticks {
		var d amqp.Delivery
		select {
		case d = <-ds:
		case <-timeout:
			t.Fatalf("%d of %d messages arrived in 30 s", i, nodes*ticks)
		}
		m, err := DecodeMetrics(d.Body)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		seq, _ := d.Headers[HeaderSeq].(int64)
		want := []float64{float64(i), float64(i % nodes), float64(i) / 3}
		if seq != int64(i+1) || d.RoutingKey != "metrics."+names[i%nodes] || !m.Time.Equal(t0.Add(time.Duration(i/nodes)*time.Second)) ||
			len(m.Values) != 3 || m.Values[0] != want[0] || m.Values[1] != want[1] || m.Values[2] != want[2] {
			t.Fatalf("message %d: seq %d, key %s, time %v, values %v; want seq %d, %s, %v", i, seq, d.RoutingKey, m.Time, m.Values, i+1, names[i%nodes], want)
		}
		if (i < nodes) != (m.Series != nil) {
			t.Fatalf("message %d: schema %v, want it on each node's first tick only", i, m.Series)
		}
	}
	for end := time.Now().Add(10 * time.Second); testutil.ToFloat64(b.sc[StreamMetrics].confirmed) < nodes*ticks; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%v of %d confirmed", testutil.ToFloat64(b.sc[StreamMetrics].confirmed), nodes*ticks)
		}
	}
	if dr := droppedMetrics(b); dr != 0 {
		t.Errorf("%v metrics dropped", dr)
	}
	writes := testutil.ToFloat64(b.m.writes) - w0
	t.Logf("%d messages in %v socket writes", nodes*ticks, writes)
	if writes > nodes*ticks/10 {
		t.Errorf("%v socket writes for %d messages: not batched", writes, nodes*ticks)
	}
}
