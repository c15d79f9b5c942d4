package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/syslog"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// Tuning. Variables of a Bus, not of the package, so tests can shorten them.
const (
	// maxInFlight and maxInFlightBytes bound the messages published and
	// not yet confirmed: 20,000 a second confirmed in 0.5 s are 10,000.
	maxInFlight      = 16384
	maxInFlightBytes = 64 << 20
	// confirmTimeout: a broker that confirms nothing for this long is
	// taken as gone; the connection is dropped and made again.
	confirmTimeout = 30 * time.Second
	// publishTimeout bounds one publish (TCP back-pressure).
	publishTimeout = 10 * time.Second
	// schemaEvery resends a node's schema so late consumers learn it.
	schemaEvery = time.Minute
	// maxLogBatch and maxLogBytes bound one logs message (a message of
	// 64 KiB texts would otherwise reach 64 MiB).
	maxLogBatch = 1000
	maxLogBytes = 1 << 20
	// maxNodes bounds the nodes whose schema is remembered.
	maxNodes = 1 << 20
	// maxBufferBytes bounds the metrics buffer's bodies.
	maxBufferBytes = 256 << 20
)

// Options are what a Bus needs besides its Config.
type Options struct {
	DataDir    string // the spool goes under <DataDir>/bus
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// BackoffMax bounds the wait between reconnects (0: 5s).
	BackoffMax time.Duration
	// ConfirmTimeout (0: 30s); tests shorten it.
	ConfirmTimeout time.Duration
}

// Bus publishes the server's streams. Its methods that take data (Tick,
// Schema, Logs, Emit) never wait for the broker.
type Bus struct {
	cfg   Config
	o     Options
	log   *slog.Logger
	m     *busMetrics
	spool *spool
	start int64 // Unix ms, header vigil-start of metrics

	metrics chan outMsg // bounded memory buffer, in messages
	// metBytes is the bytes of the bodies in metrics, bounded by
	// maxBufferBytes: a burst of schemas (every node's first tick) is
	// fifty times the size of plain ticks.
	metBytes atomic.Int64
	metSeq   atomic.Uint64

	mu    sync.Mutex // nodes
	nodes map[string]*nodeSchema
}

type nodeSchema struct {
	id     uint64
	series []string
	types  []metric.Type
	descs  []*metric.Desc // as last seen, to notice a change cheaply
	sent   time.Time      // schema last attached
}

// outMsg is one message to publish.
type outMsg struct {
	stream string
	seq    uint64
	key    string
	body   []byte
	next   pos       // spooled streams: the spool position after it
	tick   time.Time // metrics: the tick's time
}

// New checks the configuration by connecting and declaring the exchange
// (a wrong URL, bad credentials or a missing permission is an error here,
// at start) and opens the spool.
func New(cfg Config, o Options) (*Bus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 5 * time.Second
	}
	if o.ConfirmTimeout <= 0 {
		o.ConfirmTimeout = confirmTimeout
	}
	conn, err := cfg.Dial("vigil server (check)")
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		_, err = DeclareExchange(conn, ch, cfg.exchange())
	}
	conn.Close()
	if err != nil {
		return nil, err
	}
	b := &Bus{cfg: cfg, o: o, log: o.Logger, m: newMetrics(o.Registerer), start: time.Now().UnixMilli(),
		metrics: make(chan outMsg, cfg.metricsBuffer()), nodes: map[string]*nodeSchema{}}
	b.m.bufferCap.Set(float64(cfg.metricsBuffer()))
	b.spool, err = openSpool(filepath.Join(o.DataDir, "bus"), cfg.spoolBytes(), func(stream string, n int) {
		b.m.dropped.WithLabelValues(stream, "spool_full").Add(float64(n))
	})
	if err != nil {
		return nil, err
	}
	n, bytes := b.spool.waiting()
	b.m.spoolBytes.Set(float64(bytes))
	if n > 0 {
		b.log.Info("bus spool holds messages from before", "messages", n, "bytes", bytes)
	}
	return b, nil
}

// bufferLen is the metrics messages waiting in memory.
func (b *Bus) bufferLen() int { return len(b.metrics) }

// Close closes the spool; call after Run returned.
func (b *Bus) Close() error { return b.spool.close() }

// Schema implements ingest.Tap: nothing to do, Tick notices changes.
func (b *Bus) Schema(string, []*metric.Desc) {}

// Tick implements ingest.Tap: it encodes the tick into one message and
// queues it; a full buffer drops the oldest, counted.
func (b *Bus) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) []string {
	if len(values) > maxSeries {
		b.m.dropped.WithLabelValues(StreamMetrics, "too_large").Inc()
		return nil
	}
	now := time.Now()
	b.mu.Lock()
	ns := b.nodes[node]
	if ns == nil || !sameDescs(ns.descs, descs) {
		if ns == nil && len(b.nodes) >= maxNodes {
			b.mu.Unlock()
			b.m.dropped.WithLabelValues(StreamMetrics, "too_many_nodes").Inc()
			return nil
		}
		ns = &nodeSchema{descs: append([]*metric.Desc(nil), descs...)}
		for _, d := range descs {
			ns.series = append(ns.series, seriesText(d))
			ns.types = append(ns.types, d.Type)
		}
		ns.id = schemaID(ns.series)
		b.nodes[node] = ns
	}
	with := now.Sub(ns.sent) >= schemaEvery
	if with {
		ns.sent = now
	}
	body := appendMetrics(make([]byte, 0, metricsHeader+8*len(values)), t, ns.id, values, ns.types, ns.series, with)
	b.mu.Unlock()
	msg := outMsg{stream: StreamMetrics, seq: b.metSeq.Add(1), key: "metrics." + keyWord(node), body: body, tick: t}
	for {
		if b.metBytes.Load()+int64(len(body)) <= maxBufferBytes {
			select {
			case b.metrics <- msg:
				b.metBytes.Add(int64(len(body)))
				b.m.bufferFill.Set(float64(len(b.metrics)))
				return nil
			default:
			}
		}
		select { // full: the oldest goes
		case old := <-b.metrics:
			b.metBytes.Add(-int64(len(old.body)))
			b.m.dropped.WithLabelValues(StreamMetrics, "buffer_full").Inc()
		default:
			if b.metBytes.Load()+int64(len(body)) > maxBufferBytes {
				b.m.dropped.WithLabelValues(StreamMetrics, "buffer_full").Inc()
				return nil // taken by the publisher meanwhile, not yet counted out
			}
		}
	}
}

func sameDescs(a, b []*metric.Desc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Logs takes stored log records (logsvc's Stored hook) into the spool, in
// batches of one severity and app. recs is not kept.
func (b *Bus) Logs(recs []logstore.Record) {
	type group struct{ sev, app string }
	var order []group
	batches := map[group][]Log{}
	for i := range recs {
		r := &recs[i]
		g := group{syslog.SeverityName(r.Severity), r.App}
		if _, ok := batches[g]; !ok {
			order = append(order, g)
		}
		batches[g] = append(batches[g], Log{Seq: r.Seq, Time: r.Time, Received: r.Received, Host: r.Host, App: r.App, ProcID: r.ProcID,
			MsgID: r.MsgID, Severity: g.sev, Facility: r.Facility, Pattern: r.Pattern, Text: r.Text, SD: r.SD})
	}
	for _, g := range order {
		msgs := batches[g]
		for len(msgs) > 0 {
			// At most maxLogBatch messages and about maxLogBytes a message.
			n, size := 0, 0
			for n < len(msgs) && n < maxLogBatch && (n == 0 || size < maxLogBytes) {
				size += 200 + len(msgs[n].Text) + len(msgs[n].SD)
				n++
			}
			body, err := json.Marshal(LogBatch{Messages: msgs[:n]})
			msgs = msgs[n:]
			if err == nil {
				b.put(StreamLogs, "logs."+keyWord(g.sev)+"."+keyWord(g.app), body, n)
			}
		}
	}
}

// Emit implements events.Sink for stored events (the event store's
// Stored hook): events.<kind>.<node>, and job starts and ends also as
// jobs.<state>.
func (b *Bus) Emit(e events.Event) {
	body, err := json.Marshal(e)
	if err != nil {
		return
	}
	b.put(StreamEvents, "events."+keyWord(e.Kind)+"."+keyWord(e.Node), body, 1)
	if e.Kind == events.KindJobStart || e.Kind == events.KindJobEnd {
		b.put(StreamJobs, "jobs."+keyWord(e.Labels["state"]), body, 1)
	}
}

// put spools one message; count is what it carries (log messages).
func (b *Bus) put(stream, key string, body []byte, count int) {
	if _, err := b.spool.append(stream, key, body); err != nil {
		b.m.dropped.WithLabelValues(stream, "spool_error").Add(float64(count))
		b.m.spoolErrors.Inc()
		return
	}
	b.m.spooled.WithLabelValues(stream).Inc()
}

// Run publishes until ctx ends, connecting again with growing waits
// (0.5 s doubling to BackoffMax, 5 s: the broker is back within seconds of its restart) whenever the broker goes away.
func (b *Bus) Run(ctx context.Context) error {
	var warn logging.OnChange
	wait := 500 * time.Millisecond
	syncT := time.NewTicker(time.Second)
	defer syncT.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-syncT.C:
				if err := b.spool.sync(); err != nil {
					b.m.spoolErrors.Inc()
				}
				_, bytes := b.spool.waiting()
				b.m.spoolBytes.Set(float64(bytes))
				b.m.bufferFill.Set(float64(len(b.metrics)))
			}
		}
	}()
	for ctx.Err() == nil {
		began := time.Now()
		err := b.session(ctx)
		b.m.connected.Set(0)
		b.m.blocked.Set(0)
		if ctx.Err() != nil {
			break
		}
		b.m.disconnects.Inc()
		warn.Warn(b.log, "bus: broker unavailable; logs and events wait in the spool, metrics in memory", err)
		if time.Since(began) > time.Minute {
			wait = 500 * time.Millisecond // it worked for a while
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, b.o.BackoffMax)
	}
	return nil
}

// inflight is a published message awaiting its confirm.
type inflight struct {
	msg outMsg
	dc  *amqp.DeferredConfirmation
	at  time.Time
}

// session is one connection: publish from the spool (in order) and the
// metrics buffer until the connection fails or ctx ends.
func (b *Bus) session(ctx context.Context) (err error) {
	conn, err := b.cfg.Dial("vigil server")
	if err != nil {
		b.m.connectErrors.Inc()
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err == nil {
		ch, err = DeclareExchange(conn, ch, b.cfg.exchange())
	}
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		b.m.connectErrors.Inc()
		return err
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp.Error, 1))
	blockedC := conn.NotifyBlocked(make(chan amqp.Blocking, 4))
	b.m.connected.Set(1)
	b.log.Info("bus connected", "broker", Redacted(b.cfg.URL), "exchange", b.cfg.exchange())

	var q []inflight
	inflightBytes := 0
	// Unconfirmed messages of this session: spooled ones are read again
	// from the spool next time; metrics are lost, counted.
	defer func() {
		for _, f := range q {
			if f.msg.stream == StreamMetrics {
				b.m.dropped.WithLabelValues(StreamMetrics, "unconfirmed").Inc()
			}
		}
	}()
	rpos := b.spool.start()
	spoolDone := false // read to the end; wait for notify
	blocked := false
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	for {
		// Settle confirmed messages at the head, in order.
		for len(q) > 0 {
			select {
			case <-q[0].dc.Done():
			default:
				goto settled
			}
			f := q[0]
			q = q[1:]
			inflightBytes -= len(f.msg.body)
			if f.dc.Acked() {
				b.m.confirmed.WithLabelValues(f.msg.stream).Inc()
				if f.msg.stream == StreamMetrics {
					b.m.latency.Observe(time.Since(f.at).Seconds())
				} else {
					b.spool.acked(f.msg.next)
				}
				continue
			}
			b.m.nacked.WithLabelValues(f.msg.stream).Inc()
			if f.msg.stream == StreamMetrics {
				b.m.dropped.WithLabelValues(StreamMetrics, "nacked").Inc()
				continue
			}
			// A spooled message the broker refused: send it and what
			// follows again, in order, on a fresh connection.
			return fmt.Errorf("broker nacked a %s message", f.msg.stream)
		}
	settled:
		if len(q) > 0 && time.Since(q[0].at) > b.o.ConfirmTimeout {
			b.m.confirmTimeouts.Inc()
			return fmt.Errorf("no confirm from the broker for %s", b.o.ConfirmTimeout)
		}
		room := !blocked && len(q) < maxInFlight && inflightBytes < maxInFlightBytes
		// The spool first: it is in order and what we promise not to lose.
		if room && !spoolDone {
			r, rerr := b.spool.next(rpos)
			switch {
			case rerr == nil:
				rpos = r.next
				msg := outMsg{stream: r.stream, seq: r.seq, key: r.key, body: r.body, next: r.next}
				f, err := b.publish(ctx, ch, msg)
				if err != nil {
					return err
				}
				q = append(q, f)
				inflightBytes += len(msg.body)
				// Metrics take turns with a long spool, rather than wait.
				select {
				case m := <-b.metrics:
					b.metBytes.Add(-int64(len(m.body)))
					f, err := b.publish(ctx, ch, m)
					if err != nil {
						b.m.dropped.WithLabelValues(StreamMetrics, "unconfirmed").Inc()
						return err
					}
					q = append(q, f)
					inflightBytes += len(m.body)
				default:
				}
				continue
			case errors.Is(rerr, io.EOF):
				spoolDone = true
			default:
				b.m.spoolErrors.Inc()
				return rerr
			}
		}
		var head <-chan struct{}
		if len(q) > 0 {
			head = q[0].dc.Done()
		}
		var metrics chan outMsg
		if room {
			metrics = b.metrics
		}
		var notify chan struct{}
		if spoolDone {
			notify = b.spool.notify
		}
		timer.Reset(time.Second)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-closed:
			return fmt.Errorf("connection closed: %v", e)
		case e := <-chClosed:
			return fmt.Errorf("channel closed: %v", e)
		case bl := <-blockedC:
			blocked = bl.Active
			if blocked {
				b.m.blocked.Set(1)
				b.log.Warn("bus: broker blocked publishing (flow control); metrics buffer, logs spool", "reason", bl.Reason)
			} else {
				b.m.blocked.Set(0)
			}
		case <-head:
		case msg := <-metrics:
			b.metBytes.Add(-int64(len(msg.body)))
			f, err := b.publish(ctx, ch, msg)
			if err != nil {
				b.m.dropped.WithLabelValues(StreamMetrics, "unconfirmed").Inc()
				return err
			}
			q = append(q, f)
			inflightBytes += len(msg.body)
		case <-notify:
			spoolDone = false
		case <-timer.C:
		}
	}
}

func (b *Bus) publish(ctx context.Context, ch *amqp.Channel, msg outMsg) (inflight, error) {
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	p := amqp.Publishing{
		Headers:     amqp.Table{HeaderStream: msg.stream, HeaderSeq: int64(msg.seq)},
		ContentType: ContentJSON,
		Body:        msg.body,
		Timestamp:   time.Now(),
	}
	if msg.stream == StreamMetrics {
		p.ContentType = ContentMetrics
		p.Headers[HeaderStart] = b.start
	} else {
		p.DeliveryMode = amqp.Persistent
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(pctx, b.cfg.exchange(), msg.key, false, false, p)
	if err != nil {
		return inflight{}, fmt.Errorf("publish: %w", err)
	}
	b.m.published.WithLabelValues(msg.stream).Inc()
	b.m.bytes.WithLabelValues(msg.stream).Add(float64(len(msg.body)))
	if msg.stream == StreamMetrics {
		b.m.bufferFill.Set(float64(len(b.metrics)))
	}
	return inflight{msg: msg, dc: dc, at: time.Now()}, nil
}

// Stream names a routing key's stream, for consumers.
func Stream(key string) string {
	s, _, _ := strings.Cut(key, ".")
	return s
}
