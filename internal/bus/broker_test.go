package bus

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil/rabbitmq"
)

// durableQueue declares a durable queue bound to keys on the exchange, so
// it keeps what arrives while no one consumes and across broker restarts.
func durableQueue(t *testing.T, url, name string, keys ...string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	if err := ch.ExchangeDeclare(DefaultExchange, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := ch.QueueBind(name, k, DefaultExchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// collector consumes a queue, reconnecting, and records the sequence
// numbers per stream.
type collector struct {
	mu   sync.Mutex
	seqs map[string][]int64
	logs int // log messages in the logs batches
}

func (c *collector) run(ctx context.Context, url, queue string) {
	for ctx.Err() == nil {
		func() {
			conn, err := amqp.Dial(url)
			if err != nil {
				return
			}
			defer conn.Close()
			ch, _ := conn.Channel()
			ds, err := ch.ConsumeWithContext(ctx, queue, "", true, false, false, false, nil)
			if err != nil {
				return
			}
			for d := range ds {
				s, _ := d.Headers[HeaderStream].(string)
				n, _ := d.Headers[HeaderSeq].(int64)
				c.mu.Lock()
				c.seqs[s] = append(c.seqs[s], n)
				if s == StreamLogs {
					c.logs += strings.Count(string(d.Body), `"seq":`)
				}
				c.mu.Unlock()
			}
		}()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *collector) get(stream string) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.seqs[stream]...)
}

// TestBrokerOutage publishes logs, events and metrics while the broker is
// stopped for a while: every log and event message spooled during the
// outage arrives once and in order after it; metrics lost are counted.
func TestBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rabbitmq-server")
	}
	br := rabbitmq.Start(t)
	url := br.URL("guest", "guest")
	durableQueue(t, url, "check", "logs.#", "events.#", "jobs.#", "metrics.#")
	reg := prometheus.NewRegistry()
	b, err := New(Config{URL: url}, Options{DataDir: t.TempDir(), Registerer: reg, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		BackoffMax: time.Second, ConfirmTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	col := &collector{seqs: map[string][]int64{}}
	cctx, ccancel := context.WithCancel(context.Background())
	cdone := make(chan struct{})
	go func() { col.run(cctx, url, "check"); close(cdone) }()
	defer func() { ccancel(); <-cdone }()

	d := []*metric.Desc{metric.NewDesc("node_load1", "", metric.Gauge)}
	var sent int
	feed := func(dur time.Duration) {
		end := time.Now().Add(dur)
		for time.Now().Before(end) {
			recs := make([]logstore.Record, 10)
			for i := range recs {
				sent++
				recs[i] = logstore.Record{Seq: uint64(sent), Time: time.Now(), Host: "cn1", App: "sshd", Severity: 6, Text: fmt.Sprint("message ", sent)}
			}
			b.Logs(recs)
			b.Emit(events.Event{Time: time.Now(), Kind: events.KindGap, Node: "cn1", Severity: events.SeverityInfo, Summary: "x"})
			b.Tick("cn1", time.Now(), d, []float64{1})
			time.Sleep(20 * time.Millisecond)
		}
	}
	feed(time.Second)
	br.Stop()
	feed(3 * time.Second) // the outage
	br.Restart()
	feed(time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for len(col.get(StreamLogs)) < sent/10 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-done
	b.Close()
	for _, s := range []string{StreamLogs, StreamEvents} {
		seqs := col.get(s)
		if len(seqs) != sent/10 {
			t.Errorf("%s: %d messages arrived, %d sent", s, len(seqs), sent/10)
		}
		for i, n := range seqs {
			if n != int64(i+1) {
				t.Errorf("%s: message %d has seq %d: lost, repeated or out of order (%v)", s, i, n, seqs[max(0, i-3):min(len(seqs), i+3)])
				break
			}
		}
	}
	col.mu.Lock()
	if col.logs != sent {
		t.Errorf("%d log messages arrived, %d sent", col.logs, sent)
	}
	col.mu.Unlock()
	// Metrics: what did not arrive is counted as dropped (or still waiting).
	got := len(col.get(StreamMetrics))
	dropped := int(testutil.ToFloat64(b.m.dropped.WithLabelValues(StreamMetrics, "unconfirmed")) + testutil.ToFloat64(b.m.dropped.WithLabelValues(StreamMetrics, "buffer_full")))
	t.Logf("metrics: %d sent, %d arrived, %d counted dropped, %d left in the buffer", sent/10, got, dropped, b.bufferLen())
	if got+dropped+b.bufferLen() < sent/10 {
		t.Errorf("metrics: %d arrived + %d dropped + %d buffered < %d sent: loss not counted", got, dropped, b.bufferLen(), sent/10)
	}
	if testutil.ToFloat64(b.m.disconnects) < 1 {
		t.Error("vigil_bus_disconnects_total did not count the outage")
	}
}

func TestBadCredentialsAndPermissions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rabbitmq-server")
	}
	br := rabbitmq.Start(t)
	_, err := New(Config{URL: br.URL("guest", "wrong")}, Options{DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "bad credentials") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("bad password: %v (want a clear error without the password)", err)
	}
	_, err = New(Config{URL: fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/nosuch", br.Port)}, Options{DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "virtual host") {
		t.Errorf("missing vhost: %v", err)
	}
	// A user that may write but not configure: the exchange is checked
	// passively, an error while it does not exist, fine once it does.
	br.Ctl("add_user", "pub", "pw")
	br.Ctl("set_permissions", "-p", "/", "pub", "^$", ".*", ".*")
	pub := br.URL("pub", "pw")
	_, err = New(Config{URL: pub}, Options{DataDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no configure permission") {
		t.Errorf("no configure permission, no exchange: %v", err)
	}
	durableQueue(t, br.URL("guest", "guest"), "q", "#")
	b, err := New(Config{URL: pub}, Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("no configure permission, exchange declared by an admin: %v", err)
	}
	b.Close()
	// No write permission: the publish is refused at run time, counted.
	br.Ctl("set_permissions", "-p", "/", "pub", "^$", "^$", ".*")
	reg := prometheus.NewRegistry()
	b, err = New(Config{URL: pub}, Options{DataDir: t.TempDir(), Registerer: reg, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b.Emit(events.Event{Kind: events.KindGap, Node: "n"})
	b.Run(ctx)
	if n := testutil.ToFloat64(b.m.disconnects); n < 1 {
		t.Errorf("publishing without write permission: %v disconnects counted", n)
	}
	if n, _ := b.spool.waiting(); n != 1 {
		t.Errorf("the refused event should wait in the spool: %d waiting", n)
	}
}

// TestBrokerBlocked: the broker's memory alarm (what consumers that never
// ack lead to) blocks publishers. Ticks and logs handed to the bus meanwhile
// never wait; the metrics buffer stays bounded and counts its drops; the
// message in flight is never confirmed, so the connection is made again
// (counted); the logs wait in the spool and all arrive once the alarm
// clears.
func TestBrokerBlocked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts rabbitmq-server")
	}
	br := rabbitmq.Start(t)
	url := br.URL("guest", "guest")
	durableQueue(t, url, "check", "logs.#")
	b, err := New(Config{URL: url, MetricsBuffer: 100}, Options{DataDir: t.TempDir(), Registerer: prometheus.NewRegistry(), BackoffMax: time.Second,
		ConfirmTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for testutil.ToFloat64(b.m.connected) != 1 {
		time.Sleep(50 * time.Millisecond)
	}
	br.Ctl("set_vm_memory_high_watermark", "0.0000001")
	d := []*metric.Desc{metric.NewDesc("node_load1", "", metric.Gauge)}
	// The broker blocks a connection when it next publishes.
	for end := time.Now().Add(10 * time.Second); testutil.ToFloat64(b.m.blocked) != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("vigil_bus_blocked did not become 1 under the memory alarm")
		}
		b.Tick("cn1", time.Now(), d, []float64{0})
	}
	drop0 := testutil.ToFloat64(b.m.dropped.WithLabelValues(StreamMetrics, "buffer_full"))
	start := time.Now()
	sent := 0
	for i := range 1000 {
		b.Tick("cn1", time.Now(), d, []float64{float64(i)})
		if i%10 == 0 {
			sent++
			b.Logs([]logstore.Record{{Seq: uint64(sent), Time: time.Now(), Host: "cn1", App: "a", Severity: 6, Text: "m"}})
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("1000 ticks and 100 log batches took %s while blocked: the bus made them wait", took)
	}
	if n := b.bufferLen(); n > 100 {
		t.Errorf("metrics buffer holds %d, bound 100", n)
	}
	if dr := testutil.ToFloat64(b.m.dropped.WithLabelValues(StreamMetrics, "buffer_full")) - drop0; dr < 800 {
		t.Errorf("%v metrics drops counted, want at least 800 of 1000 into a buffer of 100", dr)
	}
	// What was published as the alarm went off is never confirmed: the
	// connection is given up and made again, counted.
	for end := time.Now().Add(15 * time.Second); testutil.ToFloat64(b.m.confirmTimeouts) < 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no vigil_bus_confirm_timeouts_total while the broker confirms nothing")
		}
	}
	br.Ctl("set_vm_memory_high_watermark", "0.4")
	col := &collector{seqs: map[string][]int64{}}
	cctx, ccancel := context.WithCancel(context.Background())
	cdone := make(chan struct{})
	go func() { col.run(cctx, url, "check"); close(cdone) }()
	defer func() { ccancel(); <-cdone }()
	for end := time.Now().Add(20 * time.Second); len(col.get(StreamLogs)) < sent; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after the alarm cleared: %d of %d log messages arrived", len(col.get(StreamLogs)), sent)
		}
	}
	for i, s := range col.get(StreamLogs) {
		if s != int64(i+1) {
			t.Fatalf("logs message %d has seq %d", i, s)
		}
	}
}
