package wire

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
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
	// (default 8 MiB); when it is full the oldest ticks are dropped,
	// counted and later reported as a gap.
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
}

// ClientStats counts what a Client did.
type ClientStats struct {
	Connected    atomic.Bool
	Connects     atomic.Uint64
	DialFailures atomic.Uint64 // failed attempts (dial or handshake)
	Ticks        atomic.Uint64 // ticks queued
	Dropped      atomic.Uint64 // ticks lost: queue full or connection lost
	// DroppedEvents counts Gap and NodeState frames dropped because the
	// queue held nothing else to drop.
	DroppedEvents atomic.Uint64
	Errors        atomic.Uint64 // ticks that could not be encoded
	Bytes         atomic.Uint64 // bytes written
}

// Client streams ticks to the first reachable upstream. Encoding happens
// on the caller's goroutine into a reused buffer, which a sender goroutine
// (Run) writes out, so a slow or absent upstream never blocks a tick. On
// every new connection the schemas are sent again.
type Client struct {
	o     ClientOptions
	log   *slog.Logger
	stats ClientStats
	wake  chan struct{}

	mu     sync.Mutex
	enc    *Encoder
	q      []entry // FIFO from head, ascending seq
	head   int
	qBytes int
	seq    uint64 // last entry sequence number given out
	cur    int    // index in q: no entry between head and cur holds a tick
	ndead  int    // dropped entries still in q
	free   [][]byte
	// dirty: frames of the encoder's current epoch went to a connection
	// that may have lost them, so the next connection must start over.
	dirty    bool
	lastErr  string
	inflight []entry
	avgFrame int // moving average of queued frame sizes
	// unacked are written ticks the upstream has not yet acknowledged as
	// processed; if the connection dies they are reported as gaps, since
	// they may have died in the peer's socket buffer (kill -9).
	unacked []entry
	uhead   int
	// ackConn numbers connections, so a late ack of an old one is ignored;
	// ackedTo is the current one's highest ack, which can overtake the
	// bookkeeping of the write it acknowledges.
	ackConn, ackedTo uint64
}

type entry struct {
	buf []byte
	cs  *ClientStream // nil for node-level frames
	t   time.Time
	gap gapRange // a gap of cs written ahead of the tick when it was sent
	end uint64   // connection byte offset just past this entry, once written
	seq uint64
	// next is the seq of cs's next queued entry (0: none yet), so the
	// ticks a drop invalidates are found without scanning the queue.
	next     uint64
	valuesAt int  // buf holds [Schema]Values; where Values starts
	tick     bool // buf still carries the tick (false: dropped, schema kept)
	key      bool // the values decode without cs's earlier values
	dead     bool // dropped altogether; skipped by collect
	queued   time.Time
}

// maxUnacked bounds the written-but-unacknowledged entries kept; past it
// the oldest are assumed delivered (an upstream that never acknowledges).
const maxUnacked = 1 << 17

type gapRange struct {
	set      bool
	from, to time.Time
}

// lose records that e's tick (and any gap it carried) never arrived.
func (e *entry) lose() {
	if e.cs == nil {
		return
	}
	if e.gap.set {
		e.cs.noteGap(e.gap.from)
		e.cs.noteGap(e.gap.to)
	}
	if e.tick {
		e.cs.noteGap(e.t)
	}
}

// ClientStream is one node stream of a Client.
type ClientStream struct {
	s              *Stream
	gap            bool
	gapFrom, gapTo time.Time
	last           uint64 // seq of the stream's last queued entry
	// A relayed stream (Relay) passes on another sender's frames; inSync:
	// the upstream holds the state of source's frames since a restart.
	inSync bool
	source *RelaySource
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
	return &Client{
		o:    o,
		log:  o.Log.With("component", "upstream"),
		wake: make(chan struct{}, 1),
		enc:  enc,
	}, nil
}

// Stats returns the client's counters.
func (c *Client) Stats() *ClientStats { return &c.stats }

// NewStream adds a node stream.
func (c *Client) NewStream(node string) *ClientStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &ClientStream{s: c.enc.NewStream(node)}
}

// Batch queues one tick of cs from b. It does not block on the network and
// does not keep b.
func (c *Client) Batch(cs *ClientStream, b *metric.Batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf, err := c.enc.AppendBatch(c.take(), cs.s, b)
	c.push(entry{buf: buf, cs: cs, t: b.Time}, err)
}

// Tick queues one tick of cs (for aggregators forwarding decoded ticks).
func (c *Client) Tick(cs *ClientStream, t time.Time, descs []*metric.Desc, values []float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf, err := c.enc.AppendTick(c.take(), cs.s, t, descs, values)
	c.push(entry{buf: buf, cs: cs, t: t}, err)
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

// take returns a buffer for one tick (or node-level frame), first dropping
// the oldest queued ticks while the queue is full. Dropping happens before
// encoding, so the encoder knows which streams need a keyframe or a reset
// schema.
func (c *Client) take() []byte {
	for c.qBytes >= c.o.MaxQueueBytes && c.dropOldest() {
	}
	var buf []byte
	if n := len(c.free); n > 0 {
		buf, c.free = c.free[n-1][:0], c.free[:n-1]
		// A buffer grown by a one-off big frame (a full schema after
		// connecting) is let go rather than kept for small ticks.
		if cap(buf) > 4*c.avgFrame+4096 {
			buf = nil
		}
	}
	c.enc.stamp = c.seq + 1 // the seq push will give this entry
	return buf
}

func (c *Client) push(e entry, err error) {
	if err != nil {
		c.stats.Errors.Add(1)
		e.tick = e.cs != nil
		e.lose()
		c.free = append(c.free, e.buf[:0])
		if msg := err.Error(); msg != c.lastErr {
			c.lastErr = msg
			c.log.Warn("cannot encode tick", "err", err)
		}
		return
	}
	if len(c.q) == cap(c.q) && c.head > 0 {
		n := copy(c.q, c.q[c.head:])
		clear(c.q[n:])
		c.cur = max(c.cur-c.head, 0)
		c.q, c.head = c.q[:n], 0
	}
	c.seq++
	e.seq = c.seq
	e.queued = time.Now()
	if e.cs != nil {
		e.tick = e.cs.s.valuesAt < len(e.buf) // a relayed schema comes alone
		e.valuesAt, e.key = e.cs.s.valuesAt, e.cs.s.key
		if p := c.find(e.cs.last); p != nil {
			p.next = e.seq
		}
		e.cs.last = e.seq
	}
	c.q = append(c.q, e)
	c.qBytes += len(e.buf)
	c.avgFrame += (len(e.buf) - c.avgFrame) / 8
	if e.tick || e.cs == nil {
		c.stats.Ticks.Add(1)
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
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
		fr := NewFrameReader(bufio.NewReaderSize(conn, 4096), maxHandshakeFrame)
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
	c.ackConn++
	gen := c.ackConn
	c.ackedTo = 0
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
				c.acked(gen, n)
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
		n, err := writeAll(conn, out)
		c.stats.Bytes.Add(uint64(n))
		written += uint64(n)
		keep.Reset(c.o.KeepAlive)
		c.mu.Lock()
		if err != nil {
			// What was in flight may or may not have arrived: call it lost.
			for _, e := range c.inflight {
				if e.tick {
					e.lose()
					c.stats.Dropped.Add(1)
				}
			}
		} else {
			var now time.Time
			if c.o.Written != nil {
				now = time.Now()
			}
			// Written, not yet known to be processed: keep until acked.
			for _, e := range c.inflight {
				if !e.tick {
					continue
				}
				if c.o.Written != nil {
					c.o.Written(e.t, e.queued, now)
				}
				if len(c.unacked)-c.uhead >= maxUnacked {
					c.unacked[c.uhead] = entry{}
					c.uhead++
				}
				if len(c.unacked) == cap(c.unacked) && c.uhead > 0 {
					k := copy(c.unacked, c.unacked[c.uhead:])
					clear(c.unacked[k:])
					c.unacked, c.uhead = c.unacked[:k], 0
				}
				e.end = written
				if e.end <= c.ackedTo {
					continue // the ack came before this bookkeeping
				}
				c.unacked = append(c.unacked, e)
			}
		}
		clear(c.inflight)
		c.inflight = c.inflight[:0]
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

// collect moves queued frames, up to about max bytes, into w.
func (c *Client) collect(w []byte, max int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.head < len(c.q) && (len(w) == 0 || len(w)+len(c.q[c.head].buf) <= max) {
		e := c.q[c.head]
		c.q[c.head] = entry{}
		c.head++
		if e.dead {
			c.ndead--
			continue
		}
		// A stream's gap goes out just before its next tick: older ticks
		// can no longer be dropped then, so one Gap covers them exactly.
		if cs := e.cs; e.tick && cs.gap {
			w = AppendGap(w, cs.s.node, cs.gapFrom, cs.gapTo)
			e.gap = gapRange{true, cs.gapFrom, cs.gapTo}
			cs.gap = false
		}
		w = append(w, e.buf...)
		c.qBytes -= len(e.buf)
		c.free = append(c.free, e.buf[:0])
		e.buf = nil
		c.inflight = append(c.inflight, e)
		c.dirty = true
	}
	if c.head == len(c.q) {
		c.q, c.head, c.cur = c.q[:0], 0, 0
	}
	return w
}

// find returns the queued entry with sequence number seq, or nil.
func (c *Client) find(seq uint64) *entry {
	q := c.q[c.head:]
	i, ok := slices.BinarySearchFunc(q, seq, func(e entry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if !ok || seq == 0 {
		return nil
	}
	return &q[i]
}

// dropOldest drops the oldest queued tick, and with it the later queued
// ticks of its stream up to the stream's next keyframe: they are coded
// against the dropped one. Their schema frames stay queued, so the
// stream's table stays in step with the receiver's. If no keyframe
// follows, the stream's next tick is encoded as one. Only when no tick is
// left does it drop kept schemas (dropPinned). It reports false when the
// queue is empty.
func (c *Client) dropOldest() bool {
	c.cur = max(c.cur, c.head)
	for c.cur < len(c.q) && !c.q[c.cur].tick {
		c.cur++
	}
	if c.cur == len(c.q) {
		return c.dropPinned()
	}
	e := &c.q[c.cur]
	cs := e.cs
	next := e.next
	c.strip(e)
	for {
		f := c.find(next)
		if f == nil {
			cs.s.Keyframe()
			cs.inSync = false // a relayed stream waits for its sender's keyframe
			break
		}
		if f.key && f.tick {
			break
		}
		next = f.next
		if f.tick {
			c.strip(f)
		}
	}
	c.reclaim()
	return true
}

// strip drops e's tick, keeping its schema frame if it has one.
func (c *Client) strip(e *entry) {
	e.lose()
	c.stats.Dropped.Add(1)
	n := e.valuesAt
	if n == 0 {
		c.kill(e)
		return
	}
	c.qBytes -= len(e.buf) - n
	e.buf = e.buf[:n]
	e.tick = false
}

// kill removes e from the queue (it stays as a tombstone until reclaimed).
func (c *Client) kill(e *entry) {
	c.qBytes -= len(e.buf)
	c.free = append(c.free, e.buf[:0])
	*e = entry{seq: e.seq, next: e.next, dead: true}
	c.ndead++
}

// reclaim lets go of tombstones: at the head at once, elsewhere when they
// are many (the head may be a kept schema for as long as upstream is down).
func (c *Client) reclaim() {
	for c.head < len(c.q) && c.q[c.head].dead {
		c.q[c.head] = entry{}
		c.head++
		c.ndead--
	}
	if c.ndead > 64 && 2*c.ndead > len(c.q)-c.head {
		n := 0
		for i := c.head; i < len(c.q); i++ {
			if !c.q[i].dead {
				c.q[n] = c.q[i]
				n++
			}
		}
		clear(c.q[n:])
		c.q, c.head, c.cur, c.ndead = c.q[:n], 0, 0, 0
	}
}

// dropPinned runs when the queue holds no tick, only schema frames kept for
// later ticks and node-level frames, yet is full (say, series churn while
// upstream is down for long). It drops all queued frames of the stream
// with the oldest of them, which then starts over with a reset schema;
// if another queued schema copies descriptors from that stream, every
// stream's frames go. Node-level frames go last, oldest first.
func (c *Client) dropPinned() bool {
	first := uint64(0)
	var cs *ClientStream
	for i := c.head; i < len(c.q); i++ {
		if e := &c.q[i]; !e.dead {
			if first == 0 {
				first = e.seq
			}
			if e.cs != nil {
				cs = e.cs
				break
			}
		}
	}
	if first == 0 {
		return false
	}
	if cs == nil {
		for i := c.head; i < len(c.q); i++ {
			if !c.q[i].dead {
				c.kill(&c.q[i])
				c.stats.DroppedEvents.Add(1)
				break
			}
		}
		c.reclaim()
		return true
	}
	all := cs.s.lastCopy >= first
	for i := c.head; i < len(c.q); i++ {
		e := &c.q[i]
		if e.dead || e.cs == nil || (!all && e.cs != cs) {
			continue
		}
		// No tick is queued (dropOldest came first): nothing to count.
		e.cs.s.epoch = 0 // the receiver's table is not ours any more: reset
		c.kill(e)
	}
	c.reclaim()
	return true
}

// acked drops the unacknowledged entries the upstream has processed:
// those ending at or before byte offset n of connection gen.
func (c *Client) acked(gen, n uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.ackConn {
		return
	}
	c.ackedTo = max(c.ackedTo, n)
	for c.uhead < len(c.unacked) && c.unacked[c.uhead].end <= n {
		c.unacked[c.uhead] = entry{}
		c.uhead++
	}
	if c.uhead == len(c.unacked) {
		c.unacked, c.uhead = c.unacked[:0], 0
	}
}

// lost runs after a connection ends. Ticks written but never acknowledged
// may have died with the upstream, so they are reported as gaps. Queued
// frames continue a stream state the next upstream never saw, so if any
// frame of this epoch went out they are dropped (and reported as gaps) and
// the encoder starts over.
func (c *Client) lost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := c.uhead; i < len(c.unacked); i++ {
		c.unacked[i].lose()
		c.stats.Dropped.Add(1)
	}
	clear(c.unacked)
	c.unacked, c.uhead = c.unacked[:0], 0
	if !c.dirty {
		return
	}
	// Gap and node-state frames stand alone and stay queued; ticks
	// continue the old encoding and are dropped as gaps.
	kept, n := 0, 0
	for i := c.head; i < len(c.q); i++ {
		e := c.q[i]
		c.q[i] = entry{}
		if e.dead {
			continue
		}
		if e.cs == nil {
			c.q[n] = e
			n++
			kept += len(e.buf)
			continue
		}
		if e.tick {
			e.lose()
			c.stats.Dropped.Add(1)
		}
		c.free = append(c.free, e.buf[:0])
	}
	c.q, c.head, c.qBytes, c.cur, c.ndead = c.q[:n], 0, kept, 0, 0
	c.enc.Reset()
	c.dirty = false
}

// Sink returns a function streaming each batch of node, for the sampler
// scheduler. Batches of different scheduler groups (plugins with their own
// interval) have different series; each such set gets its own stream so
// they do not force a schema update on every tick. A set is recognised by
// its exact descriptor sequence, else by its first descriptor.
func (c *Client) Sink(node string) func(b *metric.Batch) {
	var (
		mu      sync.Mutex
		streams []*ClientStream
	)
	const maxStreams = 8
	return func(b *metric.Batch) {
		mu.Lock()
		defer mu.Unlock()
		var cs *ClientStream
		for _, s := range streams {
			if s.s.same(b) {
				cs = s
				break
			}
		}
		if cs == nil && len(b.Samples) > 0 {
			for _, s := range streams {
				if len(s.s.seq) > 0 && s.s.seq[0] == b.Samples[0].Desc {
					cs = s
					break
				}
			}
		}
		if cs == nil {
			if len(streams) < maxStreams {
				cs = c.NewStream(node)
				streams = append(streams, cs)
			} else {
				cs = streams[0]
			}
		}
		c.Batch(cs, b)
	}
}

// same reports whether b has exactly the series of the stream's last tick.
// Read under the Sink's lock; seq is written only under the Client's lock
// by Batch, which the Sink's lock serialises.
func (s *Stream) same(b *metric.Batch) bool {
	if len(b.Samples) != len(s.seq) {
		return false
	}
	for i := range b.Samples {
		if b.Samples[i].Desc != s.seq[i] {
			return false
		}
	}
	return true
}

// QueueBytes is how many encoded bytes wait for the upstream.
func (c *Client) QueueBytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.qBytes
}

// DeliveredBefore returns a time such that every tick queued before it has
// been acknowledged by the upstream or dropped (and so recorded as a gap).
// An aggregator acknowledges its children only up to this point, so a tick
// it took in but had not passed on is not lost silently when it dies.
func (c *Client) DeliveredBefore() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := c.uhead; i < len(c.unacked); i++ {
		if c.unacked[i].cs != nil {
			return c.unacked[i].queued
		}
	}
	for i := range c.inflight {
		if c.inflight[i].cs != nil {
			return c.inflight[i].queued
		}
	}
	for i := c.head; i < len(c.q); i++ {
		if e := &c.q[i]; e.cs != nil && e.tick && !e.dead {
			return e.queued
		}
	}
	return time.Now()
}
