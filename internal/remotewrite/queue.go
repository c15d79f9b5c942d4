package remotewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/storage"
)

// queue is one destination. Its samples wait in max_shards partitions,
// rings that share queue_capacity (each starts with an equal part and grows
// while the whole queue has room, so an unevenly hashed load drops only
// once the queue is full); a series always goes
// to the same partition (by the hash of its label set). max_shards sending
// goroutines run; the first `shards` of them send, sender i the partitions
// p with p % shards == i. A partition has at most one request in flight
// (its send lock is held from taking a batch until the batch's answer), so
// a series' samples leave in order however many shards there are, and a
// reshard only changes who takes a partition's next batch: nothing is
// moved, lost or reordered.
type queue struct {
	cfg  Config
	url  string // redacted, for logs and status
	hc   *http.Client
	log  *slog.Logger
	wake []chan struct{} // per sender: a full batch waits in its partitions

	mu     sync.Mutex // guards the partitions' rings and queued
	parts  []partition
	queued int // samples in all partitions, at most cfg.QueueCapacity
	slots  int // the rings' lengths summed, at most 2 × cfg.QueueCapacity

	// source is the store the backfill reads from (backfill.go); nil: the
	// queue drops its oldest samples when full.
	source storage.Queryable
	seed   maphash.Seed // the writer's, so a series' partition is the same on every path
	// lagging holds the series that fell behind (guarded by mu), by their
	// encoded label set: their samples are not queued but read back from
	// source, in order, by the backfill.
	lagging map[string]*lagEntry
	behind  int         // entries of lagging not caught up
	fresh   []*lagEntry // entries behind since the backfill's last pass
	// pendingPath is where the lagging series are kept across a restart
	// (empty: not kept).
	pendingPath string
	bfWake      chan struct{} // a batch left: the backfill may find room

	shards atomic.Int32 // senders that send now, min_shards..max_shards
	// reshardEvery is how often the shard count is reconsidered.
	reshardEvery time.Duration

	stats queueStats
}

// partition is one ring of a queue.
type partition struct {
	// send is held by the sender whose batch holds samples of this
	// partition until that batch is answered. Taken with TryLock only.
	send sync.Mutex
	ring []sample
	head int // index of the oldest sample
	n    int
	base int // its equal share of queue_capacity, the ring's starting size
}

type queueStats struct {
	enqueued, sent, droppedFull, droppedRejected, droppedShutdown atomic.Uint64
	requests, failedRequests, retries, reshards                   atomic.Uint64
	deferred, backfilled, backfillErrors                          atomic.Uint64
	busyNanos                                                     atomic.Int64 // time senders spent in requests

	mu        sync.Mutex
	lastErr   string
	lastErrAt time.Time
	lastSend  time.Time
}

// DefaultReshardInterval is how often a destination's shard count is
// reconsidered (Prometheus' queue manager also uses 10 s).
const DefaultReshardInterval = 10 * time.Second

func newQueue(cfg Config, log *slog.Logger) *queue {
	cfg = cfg.withDefaults()
	u := cfg.URL
	if pu, err := parseURL(u); err == nil {
		u = pu.Redacted()
	}
	// A kept-alive connection per shard: the default keeps 2 a host, and
	// more shards would open and close a connection per request.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.MaxShards
	q := &queue{
		cfg:          cfg,
		url:          u,
		hc:           &http.Client{Timeout: cfg.Timeout.D(), Transport: tr},
		log:          log.With("destination", cfg.Name),
		parts:        make([]partition, cfg.MaxShards),
		wake:         make([]chan struct{}, cfg.MaxShards),
		reshardEvery: DefaultReshardInterval,
		lagging:      map[string]*lagEntry{},
		bfWake:       make(chan struct{}, 1),
	}
	// The partitions share queue_capacity, so it bounds the memory
	// whatever the shard count.
	for i := range q.parts {
		c := cfg.QueueCapacity / cfg.MaxShards
		if i < cfg.QueueCapacity%cfg.MaxShards {
			c++
		}
		q.parts[i].ring, q.parts[i].base = make([]sample, c), c
		q.slots += c
		q.wake[i] = make(chan struct{}, 1)
	}
	q.shards.Store(int32(cfg.MinShards))
	return q
}

// push appends one tick's samples at once, so a sender never sees half a
// tick; hs[i] is the hash of ss[i]'s series. With a backfill source, a
// sample that does not fit makes its series fall behind (lagEntry) and the
// samples of a series behind are not queued: the backfill reads them from
// the store later, in order. Without one, when the queue is full each new
// sample drops the oldest of its partition (of the fullest one if its own
// is empty): after an outage the newest data is worth more than the
// oldest.
func (q *queue) push(ss []sample, hs []uint64) {
	var sums [MaxShardsLimit]int
	np := uint64(len(q.parts))
	dropped, deferred, resent := 0, 0, 0
	lag := q.source != nil
	q.mu.Lock()
	for i, s := range ss {
		p := &q.parts[hs[i]%np]
		if lag && (len(q.lagging) > 0 || q.queued >= q.cfg.QueueCapacity || p.n == len(p.ring)) {
			switch q.lagPushLocked(s, hs[i], p) {
			case pushDeferred:
				deferred++
				continue
			case pushResent:
				resent++
				continue
			}
		}
		if q.queued >= q.cfg.QueueCapacity {
			v := p
			if v.n == 0 {
				v = q.fullestPart()
			}
			v.dropOldest()
			q.queued--
			dropped++
		}
		if p.n == len(p.ring) && !q.grow(p) {
			// Rings grown by earlier bursts hold the slots: make room
			// in this one.
			p.dropOldest()
			q.queued--
			dropped++
		}
		p.put(s)
		q.queued++
	}
	n := q.loadsLocked(&sums)
	q.mu.Unlock()
	q.stats.enqueued.Add(uint64(len(ss) - deferred - resent))
	if dropped > 0 {
		q.stats.droppedFull.Add(uint64(dropped))
	}
	if deferred > 0 {
		q.stats.deferred.Add(uint64(deferred))
	}
	q.wakeSenders(&sums, n, q.cfg.MaxSamplesPerSend)
}

// loadsLocked sums the queued samples of each sending shard's partitions
// into sums and returns the shard count.
func (q *queue) loadsLocked(sums *[MaxShardsLimit]int) int {
	n := int(q.shards.Load())
	for i := range q.parts {
		sums[i%n] += q.parts[i].n
	}
	return n
}

// wakeSenders wakes each of the n shards whose partitions hold atLeast
// samples or more.
func (q *queue) wakeSenders(sums *[MaxShardsLimit]int, n, atLeast int) {
	for i := range n {
		if sums[i] >= atLeast {
			q.signal(i)
		}
	}
}

// put appends s to p, which has room.
func (p *partition) put(s sample) {
	p.ring[(p.head+p.n)%len(p.ring)] = s
	p.n++
}

// fullestPart returns the partition holding most samples.
func (q *queue) fullestPart() *partition {
	f := &q.parts[0]
	for i := range q.parts {
		if q.parts[i].n > f.n {
			f = &q.parts[i]
		}
	}
	return f
}

func (p *partition) dropOldest() {
	p.ring[p.head] = sample{}
	p.head = (p.head + 1) % len(p.ring)
	p.n--
}

// grow doubles p's ring (at least 64 more, at most queue_capacity),
// oldest first, within the slot budget of twice queue_capacity; false if
// no slot is left.
func (q *queue) grow(p *partition) bool {
	capa := q.cfg.QueueCapacity
	c := min(capa, 2*len(p.ring)+64, len(p.ring)+2*capa-q.slots)
	if c <= len(p.ring) {
		return false
	}
	r := make([]sample, c)
	for j := range p.n {
		r[j] = p.ring[(p.head+j)%len(p.ring)]
	}
	q.slots += c - len(p.ring)
	p.ring, p.head = r, 0
	return true
}

func (q *queue) signal(i int) {
	select {
	case q.wake[i] <- struct{}{}:
	default:
	}
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for i := range q.parts {
		n += q.parts[i].n
	}
	return n
}

// oldest returns the timestamp (ms) of the oldest queued sample, by the
// partitions' heads; false if the queue is empty.
func (q *queue) oldest() (int64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var t int64
	ok := false
	for i := range q.parts {
		p := &q.parts[i]
		if p.n > 0 && (!ok || p.ring[p.head].t < t) {
			t, ok = p.ring[p.head].t, true
		}
	}
	return t, ok
}

// setShards makes n senders send from now on, and wakes every sender so
// that partitions changing hands are looked at at once.
func (q *queue) setShards(n int) {
	n = max(1, min(n, len(q.parts)))
	q.shards.Store(int32(n))
	for i := range q.wake {
		q.signal(i)
	}
}

// sender is the state of one sending goroutine.
type sender struct {
	q  *queue
	id int

	batch      []sample
	held       []int // partitions of batch, whose send locks are held
	next       int   // the partition to take from first, round robin
	raw, frame []byte
}

// run sends until ctx ends.
func (q *queue) run(ctx context.Context) {
	var wg sync.WaitGroup
	senders := make([]*sender, len(q.parts))
	for i := range senders {
		senders[i] = &sender{q: q, id: i, next: i}
		wg.Go(func() { senders[i].run(ctx) })
	}
	wg.Go(func() { q.reshardLoop(ctx) })
	if q.source != nil {
		wg.Go(func() { q.backfillLoop(ctx) })
	}
	wg.Wait()
	q.flush(senders)
	q.keepPending()
}

func (s *sender) run(ctx context.Context) {
	t := time.NewTicker(s.q.cfg.BatchSendDeadline.D())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.q.wake[s.id]:
		case <-t.C:
		}
		for ctx.Err() == nil {
			b := s.take()
			if len(b) == 0 {
				break
			}
			s.send(ctx, b, true)
			s.release()
			if s.q.source != nil {
				s.q.wakeBackfill() // room for series behind
			}
		}
	}
}

// take moves up to max_samples_per_send samples of the partitions this
// sender owns now into s.batch, holding their send locks; release lets
// them go once the batch is answered. A partition whose lock another
// sender holds (its owner before a reshard, still sending) is skipped: its
// samples must wait for that answer to stay in order.
func (s *sender) take() []sample {
	q := s.q
	n := int(q.shards.Load())
	np := len(q.parts)
	room := q.cfg.MaxSamplesPerSend
	s.batch = s.batch[:0]
	start := s.next
	q.mu.Lock()
	defer q.mu.Unlock()
	for k := 0; k < np && len(s.batch) < room; k++ {
		i := (start + k) % np
		p := &q.parts[i]
		if i%n != s.id || p.n == 0 || !p.send.TryLock() {
			continue
		}
		c := len(p.ring)
		m := min(p.n, room-len(s.batch))
		for j := range m {
			x := (p.head + j) % c
			s.batch = append(s.batch, p.ring[x])
			p.ring[x] = sample{} // release the labels for the GC
		}
		p.head = (p.head + m) % c
		p.n -= m
		q.queued -= m
		if p.n == 0 && len(p.ring) > p.base {
			// Drained after a burst that grew it: back to its share.
			q.slots -= len(p.ring) - p.base
			p.ring, p.head = make([]sample, p.base), 0
		}
		s.held = append(s.held, i)
		s.next = (i + 1) % np
	}
	return s.batch
}

func (s *sender) release() {
	n := int(s.q.shards.Load())
	for _, i := range s.held {
		s.q.parts[i].send.Unlock()
		if i%n != s.id {
			s.q.signal(i % n) // resharded meanwhile: the new owner may have skipped it
		}
	}
	s.held = s.held[:0]
}

// flush sends what is left once the senders stopped, each shard its own
// partitions in parallel, under DefaultFlushTimeout.
func (q *queue) flush(senders []*sender) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultFlushTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range senders[:q.shards.Load()] {
		wg.Go(func() {
			for {
				b := s.take()
				if len(b) == 0 {
					return
				}
				if ctx.Err() != nil {
					q.unsent(b)
				} else {
					s.send(ctx, b, false)
				}
				s.release()
			}
		})
	}
	wg.Wait()
}

// errRejected marks a 4xx answer: the data is bad, a retry would fail too.
var errRejected = errors.New("rejected")

// send posts one batch, retrying with exponential backoff on network
// errors, 5xx and 429 until it succeeds, is rejected or ctx ends.
func (s *sender) send(ctx context.Context, b []sample, retry bool) {
	q := s.q
	s.raw = appendWriteRequest(s.raw[:0], b)
	s.frame = snappy.Encode(s.frame[:cap(s.frame)], s.raw)
	backoff := q.cfg.MinBackoff.D()
	for {
		start := time.Now()
		err := q.post(ctx, s.frame)
		q.stats.busyNanos.Add(int64(time.Since(start)))
		switch {
		case err == nil:
			q.stats.sent.Add(uint64(len(b)))
			q.stats.mu.Lock()
			q.stats.lastSend = time.Now()
			q.stats.mu.Unlock()
			return
		case errors.Is(err, errRejected):
			q.stats.droppedRejected.Add(uint64(len(b)))
			q.fail(err)
			return
		}
		q.fail(err)
		if !retry || ctx.Err() != nil {
			q.unsent(b)
			return
		}
		select {
		case <-ctx.Done():
			q.unsent(b)
			return
		case <-time.After(backoff):
		}
		q.stats.retries.Add(1)
		backoff = min(2*backoff, q.cfg.MaxBackoff.D())
	}
}

// fail records an error, logging each new kind once instead of per batch.
func (q *queue) fail(err error) {
	q.stats.failedRequests.Add(1)
	msg := err.Error()
	q.stats.mu.Lock()
	defer q.stats.mu.Unlock()
	if msg != q.stats.lastErr {
		q.log.Warn("remote write failed", "err", err)
	}
	q.stats.lastErr, q.stats.lastErrAt = msg, time.Now()
}

func (q *queue) post(ctx context.Context, body []byte) error {
	q.stats.requests.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("remote write to %s: %w", q.url, err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "vigil")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	for k, v := range q.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := q.hc.Do(req)
	if err != nil {
		return fmt.Errorf("remote write to %s: %w", q.url, err)
	}
	defer resp.Body.Close()
	// A short excerpt of the answer explains a refusal; the rest is drained
	// so the connection can be reused.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("remote write to %s: HTTP %d: %s", q.url, resp.StatusCode, strings.TrimSpace(string(msg)))
	if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests {
		return fmt.Errorf("%w: %w", errRejected, err)
	}
	return err
}

// DestinationStatus is the state of one destination, as served by the
// status endpoint.
type DestinationStatus struct {
	Name            string `json:"name"`
	URL             string `json:"url"`
	Shards          int    `json:"shards"`
	MinShards       int    `json:"min_shards"`
	MaxShards       int    `json:"max_shards"`
	Reshards        uint64 `json:"reshards"`
	QueueLength     int    `json:"queue_length"`
	QueueCapacity   int    `json:"queue_capacity"`
	Enqueued        uint64 `json:"samples_enqueued"`
	Sent            uint64 `json:"samples_sent"`
	DroppedFull     uint64 `json:"samples_dropped_queue_full"`
	DroppedRejected uint64 `json:"samples_dropped_rejected"`
	DroppedShutdown uint64 `json:"samples_dropped_shutdown"`
	Requests        uint64 `json:"requests"`
	FailedRequests  uint64 `json:"failed_requests"`
	Retries         uint64 `json:"retries"`
	// The backfill (backfill.go): samples not queued but left in the store
	// to be read back, samples read back and queued, the series behind
	// now, and failed reads of the store.
	Backfill       bool      `json:"backfill"`
	Deferred       uint64    `json:"samples_deferred"`
	Backfilled     uint64    `json:"samples_backfilled"`
	BackfillSeries int       `json:"backfill_series"`
	BackfillErrors uint64    `json:"backfill_errors"`
	LastError      string    `json:"last_error,omitempty"`
	LastErrorTime  time.Time `json:"last_error_time,omitzero"`
	LastSend       time.Time `json:"last_send_time,omitzero"`
}

func (q *queue) status() DestinationStatus {
	s := &q.stats
	st := DestinationStatus{
		Name: q.cfg.Name, URL: q.url,
		Shards: int(q.shards.Load()), MinShards: q.cfg.MinShards, MaxShards: q.cfg.MaxShards, Reshards: s.reshards.Load(),
		QueueLength: q.len(), QueueCapacity: q.cfg.QueueCapacity,
		Enqueued: s.enqueued.Load(), Sent: s.sent.Load(), DroppedFull: s.droppedFull.Load(),
		DroppedRejected: s.droppedRejected.Load(), DroppedShutdown: s.droppedShutdown.Load(),
		Requests: s.requests.Load(), FailedRequests: s.failedRequests.Load(), Retries: s.retries.Load(),
	}
	st.Backfill, st.Deferred, st.Backfilled, st.BackfillErrors = q.source != nil, s.deferred.Load(), s.backfilled.Load(), s.backfillErrors.Load()
	q.mu.Lock()
	st.BackfillSeries = q.behind
	q.mu.Unlock()
	s.mu.Lock()
	st.LastError, st.LastErrorTime, st.LastSend = s.lastErr, s.lastErrAt, s.lastSend
	s.mu.Unlock()
	return st
}
