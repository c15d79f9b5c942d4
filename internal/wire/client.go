package wire

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// ClientOptions configure a Client.
type ClientOptions struct {
	// Addrs are upstream host:port addresses in failover order: the first
	// reachable one is used.
	Addrs []string
	// Key is the shared key (nil: none; the upstream must then be local).
	Key []byte
	// Name is sent in the handshake (usually the node or aggregator name).
	Name string
	Log  *slog.Logger
	// MaxQueueBytes bounds the encoded frames waiting for the upstream
	// with the values their ticks keep for a resend (default 8 MiB); when
	// it is full the oldest ticks are dropped, counted and later reported
	// as a gap. It bounds the values kept by written ticks not yet
	// acknowledged alike: past it the oldest keep none, and become gaps
	// if their connection is lost.
	MaxQueueBytes int
	// KeyframeEvery is the ticks between a stream's keyframes (default
	// DefaultKeyframeEvery). Dropping a queued tick drops the stream's
	// later queued ticks up to its next keyframe, so this bounds the
	// cost of a drop; each keyframe costs a few bytes per series.
	KeyframeEvery    int
	DialTimeout      time.Duration // default 5s
	HandshakeTimeout time.Duration // default 10s
	WriteTimeout     time.Duration // default 10s
	KeepAlive        time.Duration // ping after this much silence (default 15s)
	MinBackoff       time.Duration // first reconnect delay (default 100ms)
	MaxBackoff       time.Duration // reconnect delay cap (default 30s)
	// Written, if set, is called for each tick written to a connection with
	// the tick's timestamp, when it was queued and now: where a tick's
	// latency goes. It runs under the client's lock, so it must be quick
	// and must not call the Client.
	Written func(t, queued, now time.Time)
	// Hold keeps each tick queued until Release passes its timestamp (and
	// what was queued after it, so order is kept): a simulator encodes a
	// tick ahead of its time and has it written on time.
	Hold bool
	// Coalesce lets a tick of a stream that ticks at most this far apart
	// wait for the stream's next tick, so that the two share one write (0:
	// each tick is written at once). A write costs a node far more than
	// the bytes in it (system call, TCP, the upstream's wake-up), so at
	// 10 Hz it is most of what streaming costs. Only one tick waits at a
	// time: the upstream then hears from the node at least every two
	// intervals, well inside the three after which it counts the node
	// down. There is no timer: the next tick, any tick written at once, a
	// shutdown and a reconnect take a waiting tick along.
	Coalesce time.Duration
}

// ClientStats counts what a Client did.
type ClientStats struct {
	Connected    atomic.Bool
	Connects     atomic.Uint64
	DialFailures atomic.Uint64 // failed attempts (dial or handshake)
	Ticks        atomic.Uint64 // ticks queued
	Dropped      atomic.Uint64 // ticks lost: queue full, or past the bound when a connection was lost
	// DroppedEvents counts Gap and NodeState frames dropped because the
	// queue held nothing else to drop.
	DroppedEvents atomic.Uint64
	Errors        atomic.Uint64 // ticks that could not be encoded
	// Resent counts ticks encoded again after a lost connection, for an
	// upstream that may lack them.
	Resent atomic.Uint64
	Bytes  atomic.Uint64 // bytes written
	// IORecords counts per-file I/O records queued; DroppedIORecords
	// those lost to the record bound (IORecords).
	IORecords, DroppedIORecords atomic.Uint64
}

// Client streams ticks to the first reachable upstream. Encoding happens
// on the caller's goroutine into a reused buffer of its send queue, which
// a sender goroutine (Run) writes out, so a slow or absent upstream never
// blocks a tick. On every new connection the schemas are sent again, and
// the ticks the last one did not acknowledge.
type Client struct {
	o     ClientOptions
	log   *slog.Logger
	stats ClientStats
	wake  chan struct{}

	mu      sync.Mutex
	enc     *Encoder
	sq      sendQueue
	lastErr string
	again   []entry // scratch of lost
}

// ClientStream is one node stream of a Client.
type ClientStream struct {
	// What every tick reads first, so a relay touches one cache line of
	// each of its thousands of streams.
	s    *Stream
	last uint64 // seq of the stream's last queued entry
	// A relayed stream (Relay) passes on another sender's frames; inSync:
	// the upstream holds the state of source's frames since a restart.
	source         *RelaySource
	inSync         bool
	gap            bool
	gapFrom, gapTo time.Time
	queued         time.Time // when the stream's last tick was queued (Coalesce)
}

// NewClient checks the options; Run does the work.
func NewClient(o ClientOptions) (*Client, error) {
	if len(o.Addrs) == 0 {
		return nil, errors.New("wire client: no upstream address")
	}
	for _, a := range o.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil, fmt.Errorf("upstream %q: %w", a, err)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.DialTimeout, 5*time.Second)
	def(&o.HandshakeTimeout, 10*time.Second)
	def(&o.WriteTimeout, 10*time.Second)
	def(&o.KeepAlive, 15*time.Second)
	def(&o.MinBackoff, 100*time.Millisecond)
	def(&o.MaxBackoff, 30*time.Second)
	if o.MaxQueueBytes <= 0 {
		o.MaxQueueBytes = 8 << 20
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.KeyframeEvery <= 0 {
		o.KeyframeEvery = DefaultKeyframeEvery
	}
	enc := NewEncoder()
	enc.SetKeyframeEvery(o.KeyframeEvery)
	c := &Client{
		o:    o,
		log:  o.Log.With("component", "upstream"),
		wake: make(chan struct{}, 1),
		enc:  enc,
	}
	c.sq = sendQueue{max: o.MaxQueueBytes, stats: &c.stats, hold: o.Hold}
	return c, nil
}

// Stats returns the client's counters.
func (c *Client) Stats() *ClientStats { return &c.stats }

// NewStream adds a node stream.
func (c *Client) NewStream(node string) *ClientStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &ClientStream{s: c.enc.NewStream(node)}
}

// Tick queues one tick of cs: values[i] is the value of descs[i] (a
// metric.Batch's Time, Descs and Values, or a decoded tick an aggregator
// forwards). It does not block on the network and keeps neither slice.
func (c *Client) Tick(cs *ClientStream, t time.Time, descs []*metric.Desc, values []float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf, err := c.enc.AppendTick(c.take(), cs.s, t, descs, values)
	now := time.Now()
	e := entry{buf: buf, cs: cs, t: t, queued: now}
	if err == nil {
		// Kept to encode the tick again should the connection that
		// takes it be lost before the upstream acknowledges it.
		e.descs, e.vals = cs.s.seq, c.sq.keep(values)
	}
	if c.enqueue(e, err) && c.due(cs, now) {
		c.Flush()
	}
}

// due tells whether the tick of cs just queued at now must be written at
// once, or may wait for the stream's next one (ClientOptions.Coalesce):
// it waits if the stream's last tick came at most Coalesce ago and
// nothing else waits. c.mu is held.
func (c *Client) due(cs *ClientStream, now time.Time) bool {
	prev := cs.queued
	cs.queued = now
	return c.o.Coalesce <= 0 || prev.IsZero() || now.Sub(prev) > c.o.Coalesce ||
		c.sq.waiting() > 1
}

// Release lets the sender write the ticks held (ClientOptions.Hold) whose
// timestamp is not after t.
func (c *Client) Release(t time.Time) {
	c.mu.Lock()
	if t.After(c.sq.released) {
		c.sq.released = t
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Gap queues a gap of node (ticks from..to lost further down the tree).
func (c *Client) Gap(node string, from, to time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := c.take()
	c.push(entry{buf: AppendGap(buf, node, from, to), t: to}, nil)
}

// NodeState queues a node's up/down change.
func (c *Client) NodeState(node string, up bool, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := c.take()
	c.push(entry{buf: AppendNodeState(buf, node, up, t), t: t}, nil)
}

func (cs *ClientStream) noteGap(t time.Time) {
	if !cs.gap || t.Before(cs.gapFrom) {
		cs.gapFrom = t
	}
	if !cs.gap || t.After(cs.gapTo) {
		cs.gapTo = t
	}
	cs.gap = true
}

// take returns a buffer for one frame from the queue, which may first drop
// queued ticks, and tells the encoder the seq push will give it.
func (c *Client) take() []byte {
	buf := c.sq.take()
	c.enc.stamp = c.sq.seq + 1
	return buf
}

func (c *Client) push(e entry, err error) {
	if c.enqueue(e, err) {
		c.Flush()
	}
}

// enqueue queues e, or counts and drops it if err says it could not be
// encoded; it reports whether e was queued.
func (c *Client) enqueue(e entry, err error) bool {
	if err != nil {
		c.stats.Errors.Add(1)
		e.tick = e.cs != nil
		e.lose()
		c.sq.release(e.buf)
		c.sq.forget(&e)
		if msg := err.Error(); msg != c.lastErr {
			c.lastErr = msg
			c.log.Warn("cannot encode tick", "err", err)
		}
		return false
	}
	c.sq.push(e)
	return true
}

// Run connects, streams and reconnects with backoff until ctx is done.
func (c *Client) Run(ctx context.Context) error {
	backoff := c.o.MinBackoff
	failing := false
	for ctx.Err() == nil {
		conn, addr, fr, sess, err := c.connect(ctx)
		if err != nil {
			c.stats.DialFailures.Add(1)
			// Say it once per outage, not on every retry.
			if !failing {
				lvl := slog.LevelWarn
				if errors.Is(err, ErrAuth) {
					lvl = slog.LevelError // a key mismatch needs an admin
				}
				c.log.Log(ctx, lvl, "no upstream reachable; retrying", "addrs", c.o.Addrs, "err", err)
				failing = true
			} else {
				c.log.Debug("upstream still unreachable", "err", err)
			}
			d := backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, c.o.MaxBackoff)
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			continue
		}
		failing = false
		backoff = c.o.MinBackoff
		c.stats.Connects.Add(1)
		c.stats.Connected.Store(true)
		c.log.Info("upstream connected", "addr", addr)
		err = c.stream(ctx, conn, fr, sess)
		conn.Close()
		c.stats.Connected.Store(false)
		c.lost()
		if ctx.Err() != nil {
			break
		}
		c.log.Warn("upstream connection lost", "addr", addr, "err", err)
	}
	return nil
}

// connect returns the first upstream that completes the handshake, the
// reader of its frames (which may hold bytes read past the handshake) and
// the keyed session's frame keys (nil without a key).
func (c *Client) connect(ctx context.Context) (net.Conn, string, *FrameReader, *session, error) {
	var errs []error
	for _, addr := range c.o.Addrs {
		d := net.Dialer{Timeout: c.o.DialTimeout}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		_ = conn.SetDeadline(time.Now().Add(c.o.HandshakeTimeout))
		fr := NewFrameReader(bufio.NewReaderSize(newRawReader(conn), 4096), maxHandshakeFrame)
		_, sess, err := clientHandshake(conn, fr, c.o.Key, c.o.Name)
		if err != nil {
			conn.Close()
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		_ = conn.SetDeadline(time.Time{})
		fr.max = 1 << 16 // acks, and a close with its reason
		return conn, addr, fr, sess, nil
	}
	return nil, "", nil, nil, errors.Join(errs...)
}

// stream writes queued frames until the connection fails or ctx is done.
// With a keyed session each frame's CRC is replaced by its tag as it is
// written (sealing happens here, outside the queue's lock).
func (c *Client) stream(ctx context.Context, conn net.Conn, fr *FrameReader, sess *session) error {
	var send *frameMAC
	if sess != nil {
		send = sess.send // fr checks with sess.recv since the Ready
	}
	c.mu.Lock()
	gen := c.sq.connected()
	c.mu.Unlock()
	dead := make(chan error, 1)
	go func() {
		// The upstream sends nothing after Ready but Acks and a Close;
		// reading notices those and a dropped connection.
		for {
			typ, payload, err := fr.Next()
			if err != nil {
				dead <- fmt.Errorf("read: %w", err)
				return
			}
			switch typ {
			case frameClose:
				dead <- fmt.Errorf("upstream closed: %s", closeReason(payload))
				return
			case frameKeyReq:
				c.keyRequested(payload)
			case frameAck:
				p := payloadReader{b: payload}
				n := p.uvarint("ack")
				if p.err != nil {
					dead <- fmt.Errorf("bad ack from upstream: %w", p.err)
					return
				}
				c.mu.Lock()
				c.sq.acked(gen, n)
				c.mu.Unlock()
				// The upstream is alive (it repeats its Ack while it
				// holds a frame): a write blocked meanwhile may wait on.
				if ctx.Err() == nil { // not while flushing at shutdown
					_ = conn.SetWriteDeadline(time.Now().Add(c.o.WriteTimeout))
				}
			}
		}
	}()
	keep := time.NewTimer(c.o.KeepAlive)
	defer keep.Stop()
	w := newRawWriter(conn)
	var wbuf, sealed []byte
	var written uint64
	for {
		wbuf = c.collect(wbuf[:0], 256<<10)
		if len(wbuf) == 0 {
			select {
			case <-ctx.Done():
				c.flush(conn, send)
				return ctx.Err()
			case err := <-dead:
				return err
			case <-c.wake:
				continue
			case <-keep.C:
				wbuf = appendFrame(wbuf, framePing, nil)
			}
		}
		out := wbuf
		if send != nil {
			sealed = send.seal(sealed[:0], wbuf)
			out = sealed
		}
		_ = conn.SetWriteDeadline(time.Now().Add(c.o.WriteTimeout))
		n, err := w.Write(out)
		c.stats.Bytes.Add(uint64(n))
		written += uint64(n)
		keep.Reset(c.o.KeepAlive)
		c.mu.Lock()
		c.sq.written(err, written, c.o.Written)
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}

// flush writes what is queued and a Close frame, within a second, so a
// stopping sampler's last ticks arrive and the upstream sees a clean end.
func (c *Client) flush(conn net.Conn, send *frameMAC) {
	_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
	var w, out []byte
	for {
		w = c.collect(w[:0], 256<<10)
		if len(w) == 0 {
			break
		}
		out = send.seal(out[:0], w)
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
	_, _ = conn.Write(send.seal(nil, appendClose(nil, "shutting down")))
}

// lost runs after a connection ends: the ticks the upstream may lack
// are encoded again, in order, for the next connection (sendQueue.lost).
func (c *Client) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	again, reset := c.sq.lost(c.again[:0])
	if !reset {
		return
	}
	c.enc.Reset()
	for i := range again {
		e := &again[i]
		if e.cs == nil {
			c.sq.push(*e)
			continue
		}
		buf, err := c.enc.AppendTick(c.take(), e.cs.s, e.t, e.descs, e.vals)
		c.stats.Resent.Add(1)
		c.push(entry{buf: buf, cs: e.cs, t: e.t, queued: e.queued, again: true, descs: e.cs.s.seq, vals: e.vals}, err)
	}
	clear(again)
	c.again = again[:0]
}

// collect moves queued frames, up to about max bytes, into w.
func (c *Client) collect(w []byte, max int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sq.collect(w, max)
}

// Sink returns, for the sampler scheduler, a function that gives each
// scheduler group (plugins with their own interval) a stream of node of
// its own, so groups with different series do not force a schema update
// on every tick.
func (c *Client) Sink(node string) func(group int) func(b *metric.Batch) {
	return func(int) func(b *metric.Batch) {
		cs := c.NewStream(node)
		return func(b *metric.Batch) { c.Tick(cs, b.Time, b.Descs, b.Values) }
	}
}

// QueueBytes is how many encoded bytes wait for the upstream.
func (c *Client) QueueBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sq.bytes
}

// DeliveredBefore returns a time such that every tick queued before it has
// been acknowledged by the upstream or dropped (and so recorded as a gap).
// An aggregator acknowledges its children only up to this point, so a tick
// it took in but had not passed on is not lost silently when it dies.
func (c *Client) DeliveredBefore() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sq.deliveredBefore()
}
