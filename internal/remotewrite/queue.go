package remotewrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/snappy"
)

// queue holds the samples for one destination in a fixed ring and sends
// them from one goroutine, so a series' samples leave in order.
type queue struct {
	cfg  Config
	url  string // redacted, for logs and status
	hc   *http.Client
	log  *slog.Logger
	full chan struct{} // signalled when a batch is ready

	mu   sync.Mutex // guards ring, head, n
	ring []sample
	head int // index of the oldest sample
	n    int

	// Owned by the sending goroutine.
	batch      []sample
	raw, frame []byte

	stats queueStats
}

type queueStats struct {
	enqueued, sent, droppedFull, droppedRejected, droppedShutdown atomic.Uint64
	requests, failedRequests, retries                             atomic.Uint64

	mu        sync.Mutex
	lastErr   string
	lastErrAt time.Time
	lastSend  time.Time
}

func newQueue(cfg Config, log *slog.Logger) *queue {
	cfg = cfg.withDefaults()
	u := cfg.URL
	if pu, err := parseURL(u); err == nil {
		u = pu.Redacted()
	}
	return &queue{
		cfg:  cfg,
		url:  u,
		hc:   &http.Client{Timeout: cfg.Timeout.D()},
		log:  log.With("destination", cfg.Name),
		full: make(chan struct{}, 1),
		ring: make([]sample, cfg.QueueCapacity),
	}
}

// push appends one tick's samples at once, so a sender never sees half a
// tick. It drops the oldest when the ring is full: after an outage the
// newest data is worth more than the oldest.
func (q *queue) push(ss []sample) {
	q.mu.Lock()
	c := len(q.ring)
	dropped := 0
	for _, s := range ss {
		if q.n == c {
			q.ring[q.head] = sample{}
			q.head = (q.head + 1) % c
			q.n--
			dropped++
		}
		q.ring[(q.head+q.n)%c] = s
		q.n++
	}
	ready := q.n >= q.cfg.MaxSamplesPerSend
	q.mu.Unlock()
	q.stats.enqueued.Add(uint64(len(ss)))
	if dropped > 0 {
		q.stats.droppedFull.Add(uint64(dropped))
	}
	if ready {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
}

// take moves up to max samples into q.batch.
func (q *queue) take(max int) []sample {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(q.n, max)
	q.batch = q.batch[:0]
	c := len(q.ring)
	for i := 0; i < k; i++ {
		j := (q.head + i) % c
		q.batch = append(q.batch, q.ring[j])
		q.ring[j] = sample{} // release the labels for the GC
	}
	q.head = (q.head + k) % c
	q.n -= k
	return q.batch
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// run sends until ctx ends, then flushes what is left under
// DefaultFlushTimeout.
func (q *queue) run(ctx context.Context) {
	t := time.NewTicker(q.cfg.BatchSendDeadline.D())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			q.flush()
			return
		case <-q.full:
		case <-t.C:
		}
		for ctx.Err() == nil {
			b := q.take(q.cfg.MaxSamplesPerSend)
			if len(b) == 0 {
				break
			}
			q.send(ctx, b, true)
		}
	}
}

func (q *queue) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultFlushTimeout)
	defer cancel()
	for {
		b := q.take(q.cfg.MaxSamplesPerSend)
		if len(b) == 0 {
			return
		}
		if ctx.Err() != nil {
			q.stats.droppedShutdown.Add(uint64(len(b)))
			continue
		}
		q.send(ctx, b, false)
	}
}

// errRejected marks a 4xx answer: the data is bad, a retry would fail too.
var errRejected = errors.New("rejected")

// send posts one batch, retrying with exponential backoff on network
// errors, 5xx and 429 until it succeeds, is rejected or ctx ends.
func (q *queue) send(ctx context.Context, b []sample, retry bool) {
	q.raw = appendWriteRequest(q.raw[:0], b)
	q.frame = snappy.Encode(q.frame[:cap(q.frame)], q.raw)
	backoff := q.cfg.MinBackoff.D()
	for {
		err := q.post(ctx, q.frame)
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
			q.stats.droppedShutdown.Add(uint64(len(b)))
			return
		}
		select {
		case <-ctx.Done():
			q.stats.droppedShutdown.Add(uint64(len(b)))
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
	Name            string    `json:"name"`
	URL             string    `json:"url"`
	QueueLength     int       `json:"queue_length"`
	QueueCapacity   int       `json:"queue_capacity"`
	Enqueued        uint64    `json:"samples_enqueued"`
	Sent            uint64    `json:"samples_sent"`
	DroppedFull     uint64    `json:"samples_dropped_queue_full"`
	DroppedRejected uint64    `json:"samples_dropped_rejected"`
	DroppedShutdown uint64    `json:"samples_dropped_shutdown"`
	Requests        uint64    `json:"requests"`
	FailedRequests  uint64    `json:"failed_requests"`
	Retries         uint64    `json:"retries"`
	LastError       string    `json:"last_error,omitempty"`
	LastErrorTime   time.Time `json:"last_error_time,omitzero"`
	LastSend        time.Time `json:"last_send_time,omitzero"`
}

func (q *queue) status() DestinationStatus {
	s := &q.stats
	st := DestinationStatus{
		Name: q.cfg.Name, URL: q.url, QueueLength: q.len(), QueueCapacity: len(q.ring),
		Enqueued: s.enqueued.Load(), Sent: s.sent.Load(), DroppedFull: s.droppedFull.Load(),
		DroppedRejected: s.droppedRejected.Load(), DroppedShutdown: s.droppedShutdown.Load(),
		Requests: s.requests.Load(), FailedRequests: s.failedRequests.Load(), Retries: s.retries.Load(),
	}
	s.mu.Lock()
	st.LastError, st.LastErrorTime, st.LastSend = s.lastErr, s.lastErrAt, s.lastSend
	s.mu.Unlock()
	return st
}
