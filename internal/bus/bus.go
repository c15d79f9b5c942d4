package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
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
	// not yet confirmed: 20,000 a second confirmed within 0.2 s are 4,000.
	// Not more: the client library walks all unconfirmed messages on each
	// of the broker's multiple-acks (amqp091-go 1.10 to 1.16,
	// deferredConfirmations.ConfirmMultiple), so when the broker falls
	// behind, a window of 16,384 made confirms cost a fifth of the
	// publisher's CPU; a longer window only moves the queue into the broker.
	maxInFlight      = 4096
	maxInFlightBytes = 64 << 20
	// confirmTimeout: a broker that confirms nothing for this long is
	// taken as gone; the connection is dropped and made again.
	confirmTimeout = 30 * time.Second
	// batchWait is how long the publisher lets metrics gather before it
	// sends them, one socket write for all (at 20,000 a second, about 40).
	batchWait = 2 * time.Millisecond
	// maxBatch and maxBatchBytes bound what one batch takes from the buffer.
	maxBatch      = 1024
	maxBatchBytes = 1 << 20
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

	// metrics is the bounded memory buffer, in messages and in bytes
	// (maxBufferBytes: a burst of schemas, every node's first tick, is
	// fifty times the size of plain ticks).
	metrics *ring
	metSeq  atomic.Uint64
	sc      map[string]*streamCounters // of the four streams, fixed at New

	mu    sync.Mutex // nodes
	nodes map[string]*nodeSchema
}

type nodeSchema struct {
	id     uint64
	series []string
	types  []metric.Type
	descs  []*metric.Desc // as last seen, to notice a change cheaply
	sent   time.Time      // schema last attached
	key    string         // routing key
}

// streamCounters are a stream's counters, looked up once rather than per
// message.
type streamCounters struct {
	published, confirmed, nacked, bytes prometheus.Counter
	unconfirmed, nackDropped, full      prometheus.Counter // dropped: metrics only
}

func (b *Bus) counters(stream string) *streamCounters {
	if c := b.sc[stream]; c != nil {
		return c
	}
	return b.m.streamCounters(stream) // a stream name from an old spool: not expected
}

// outMsg is one message to publish.
type outMsg struct {
	stream string
	seq    uint64
	key    string
	body   []byte
	next   pos     // spooled streams: the spool position after it
	pooled *[]byte // metrics: body's holder in bodyPool
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
		metrics: newRing(cfg.metricsBuffer(), maxBufferBytes), nodes: map[string]*nodeSchema{}, sc: map[string]*streamCounters{}}
	for _, s := range []string{StreamMetrics, StreamLogs, StreamEvents, StreamJobs} {
		b.sc[s] = b.m.streamCounters(s)
	}
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
func (b *Bus) bufferLen() int { return b.metrics.len() }

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
		ns = &nodeSchema{descs: append([]*metric.Desc(nil), descs...), key: "metrics." + keyWord(node)}
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
	p := getBody()
	body := appendMetrics((*p)[:0], t, ns.id, values, ns.types, ns.series, with)
	key := ns.key
	b.mu.Unlock()
	msg := outMsg{stream: StreamMetrics, seq: b.metSeq.Add(1), key: key, body: body, pooled: p}
	dropped, rejected := b.metrics.push(msg)
	if rejected {
		putBody(&msg)
		dropped++
	}
	if dropped > 0 {
		b.sc[StreamMetrics].full.Add(float64(dropped))
	}
	return nil
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
				b.m.bufferFill.Set(float64(b.metrics.len()))
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
	dc     *amqp.DeferredConfirmation
	at     time.Time
	stream string
	next   pos // spooled streams: acknowledged in the spool when confirmed
	size   int
}

// session is one connection: publish from the spool (in order) and the
// metrics buffer until the connection fails or ctx ends.
func (b *Bus) session(ctx context.Context) (err error) {
	var cork *corkConn
	conn, err := b.cfg.dial("vigil server", func(c net.Conn) net.Conn { cork = &corkConn{Conn: c, writes: b.m.writes}; return cork })
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

	p := &publisher{b: b, ch: ch, exchange: b.cfg.exchange(),
		metricsHdr: amqp.Table{HeaderStream: StreamMetrics, HeaderSeq: int64(0), HeaderStart: b.start},
		spoolHdr:   amqp.Table{HeaderStream: "", HeaderSeq: int64(0)}}
	// Unconfirmed messages of this session: spooled ones are read again
	// from the spool next time; metrics are lost, counted.
	defer func() {
		for _, f := range p.q[p.qh:] {
			if f.stream == StreamMetrics {
				b.sc[StreamMetrics].unconfirmed.Inc()
			}
		}
	}()
	rpos := b.spool.start()
	spoolDone := false // read to the end; wait for notify
	blocked := false
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	batchT := time.NewTimer(time.Hour)
	batchT.Stop()
	defer batchT.Stop()
	batchArmed := false
	var lastBatch time.Time
	batch := make([]outMsg, 0, 64)
	for {
		now := time.Now()
		if err := p.settle(now); err != nil {
			return err
		}
		if p.len() > 0 && now.Sub(p.q[p.qh].at) > b.o.ConfirmTimeout {
			b.m.confirmTimeouts.Inc()
			return fmt.Errorf("no confirm from the broker for %s", b.o.ConfirmTimeout)
		}
		// The spool first: it is in order and what we promise not to lose.
		if !blocked && p.room() && !spoolDone {
			cork.cork()
			for n := 0; n < maxBatch && p.room(); n++ {
				r, rerr := b.spool.next(rpos)
				if errors.Is(rerr, io.EOF) {
					spoolDone = true
					break
				}
				if rerr != nil {
					b.m.spoolErrors.Inc()
					return rerr
				}
				rpos = r.next
				if err := p.publish(outMsg{stream: r.stream, seq: r.seq, key: r.key, body: r.body, next: r.next}, now); err != nil {
					return err
				}
				// Metrics take turns with a long spool, rather than wait.
				if batch = b.metrics.take(batch[:0], 1, 0); len(batch) > 0 {
					if err := p.publishAll(batch, now); err != nil {
						return err
					}
				}
			}
			if err := cork.uncork(); err != nil {
				return err
			}
			continue
		}
		var wake chan struct{}
		var batchC <-chan time.Time
		if !blocked && p.room() {
			if b.metrics.len() == 0 {
				wake = b.metrics.wake
			} else if batchArmed {
				batchC = batchT.C
			} else if wait := batchWait - now.Sub(lastBatch); wait > 0 {
				// Let a few more gather: one write, one wake-up for all.
				batchT.Reset(wait)
				batchArmed, batchC = true, batchT.C
			} else {
				lastBatch = now
				batch = b.metrics.take(batch[:0], min(maxBatch, maxInFlight-p.len()), maxBatchBytes)
				cork.cork()
				err := p.publishAll(batch, now)
				if err == nil {
					err = cork.uncork()
				}
				if err != nil {
					return err
				}
				continue
			}
		}
		var head <-chan struct{}
		if p.len() > 0 {
			head = p.q[p.qh].dc.Done()
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
		case <-wake:
		case <-batchC:
			batchArmed = false
		case <-notify:
			spoolDone = false
		case <-timer.C:
		}
	}
}

// publisher is a session's publishing side: the messages awaiting their
// confirms, in order, and the headers reused for every message.
type publisher struct {
	b                    *Bus
	ch                   *amqp.Channel
	exchange             string
	metricsHdr, spoolHdr amqp.Table
	q                    []inflight // q[qh:] are unconfirmed
	qh                   int
	bytes                int // of q[qh:]
}

func (p *publisher) len() int { return len(p.q) - p.qh }

// room says whether more may be published: at most maxInFlight messages
// and maxInFlightBytes unconfirmed.
func (p *publisher) room() bool {
	return p.len() < maxInFlight && p.bytes < maxInFlightBytes
}

// settle counts the confirmed messages at the head, in order, and
// acknowledges spooled ones in the spool. A spooled message the broker
// refused ends the session: it and what follows go again, in order, on a
// fresh connection.
func (p *publisher) settle(now time.Time) error {
	b := p.b
	for p.len() > 0 {
		f := p.q[p.qh] // a copy: the slot is reused below
		select {
		case <-f.dc.Done():
		default:
			return nil
		}
		p.q[p.qh] = inflight{}
		p.qh++
		p.bytes -= f.size
		if p.qh == len(p.q) {
			p.q, p.qh = p.q[:0], 0
		} else if p.qh >= 4096 && 2*p.qh >= len(p.q) {
			n := copy(p.q, p.q[p.qh:])
			clear(p.q[n:])
			p.q, p.qh = p.q[:n], 0
		}
		sc := b.counters(f.stream)
		if f.dc.Acked() {
			sc.confirmed.Inc()
			if f.stream == StreamMetrics {
				b.m.latency.Observe(now.Sub(f.at).Seconds())
			} else {
				b.spool.acked(f.next)
			}
			continue
		}
		sc.nacked.Inc()
		if f.stream == StreamMetrics {
			sc.nackDropped.Inc()
			continue
		}
		return fmt.Errorf("broker nacked a %s message", f.stream)
	}
	return nil
}

// publishAll publishes metrics messages and recycles their bodies; after
// an error the rest are dropped, counted.
func (p *publisher) publishAll(msgs []outMsg, now time.Time) error {
	for i := range msgs {
		err := p.publish(msgs[i], now)
		putBody(&msgs[i])
		if err != nil {
			p.b.sc[StreamMetrics].unconfirmed.Add(float64(len(msgs) - i))
			for j := i + 1; j < len(msgs); j++ {
				putBody(&msgs[j])
			}
			clear(msgs)
			return err
		}
	}
	clear(msgs) // no stale bodies in the batch's backing array
	return nil
}

// publish sends msg; the client library has copied its body when it
// returns.
func (p *publisher) publish(msg outMsg, now time.Time) error {
	pb := amqp.Publishing{Body: msg.body, Timestamp: now}
	if msg.stream == StreamMetrics {
		pb.Headers, pb.ContentType = p.metricsHdr, ContentMetrics
	} else {
		pb.Headers, pb.ContentType, pb.DeliveryMode = p.spoolHdr, ContentJSON, amqp.Persistent
		pb.Headers[HeaderStream] = msg.stream
	}
	pb.Headers[HeaderSeq] = int64(msg.seq)
	// The library encodes the headers before it returns, so one table
	// serves every message. (Its context variant ignores the context, so
	// none is made: TCP back-pressure holds a publish as long as the
	// broker does, while Tick drops the buffer's oldest.)
	dc, err := p.ch.PublishWithDeferredConfirm(p.exchange, msg.key, false, false, pb)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	sc := p.b.counters(msg.stream)
	sc.published.Inc()
	sc.bytes.Add(float64(len(msg.body)))
	p.q = append(p.q, inflight{dc: dc, at: now, stream: msg.stream, next: msg.next, size: len(msg.body)})
	p.bytes += len(msg.body)
	return nil
}

// Stream names a routing key's stream, for consumers.
func Stream(key string) string {
	s, _, _ := strings.Cut(key, ".")
	return s
}
