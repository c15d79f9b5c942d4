package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Time bounds (issue 11). The TSDB accepts any future timestamp, and the
// newest one becomes the head's maximum time: from then on everything older
// than that minus an hour is "out of bounds", for every node, and the WAL
// brings it back after a restart. So samples too far ahead of the server's
// clock are refused before they reach the TSDB, and a data directory an
// earlier version let be poisoned is repaired when it is opened.

// DefaultMaxFuture is how far ahead of the server's clock a sample may be,
// as Prometheus' own limit for scraped and remote-written samples.
const DefaultMaxFuture = 10 * time.Minute

// maxSenderLabels bounds the sender label of vigil_samples_rejected_total;
// senders beyond it are counted as "other".
const maxSenderLabels = 256

// ErrTooFarInFuture is the per-sample refusal of a timestamp more than
// Options.MaxFuture ahead of the server's clock.
var ErrTooFarInFuture = errors.New("timestamp too far in the future")

// FutureError is ErrTooFarInFuture with the numbers a sender needs to
// find its clock's error.
type FutureError struct {
	T, Now time.Time
	Limit  time.Duration
}

func (e *FutureError) Error() string {
	return fmt.Sprintf("timestamp %s is %s ahead of the server's clock (limit %s): check the sender's clock",
		e.T.UTC().Format(time.RFC3339Nano), e.T.Sub(e.Now).Round(time.Millisecond), e.Limit)
}

func (e *FutureError) Unwrap() error { return ErrTooFarInFuture }

// Reasons of vigil_samples_rejected_total.
const (
	reasonFuture     = "too_far_in_future"
	reasonOutOfOrder = "out_of_order"
	reasonOutOfBound = "out_of_bounds"
	reasonTooOld     = "too_old"
	reasonDuplicate  = "duplicate"
)

// rejectReason names a per-sample refusal for the counter.
func rejectReason(err error) string {
	switch {
	case errors.Is(err, ErrTooFarInFuture):
		return reasonFuture
	case errors.Is(err, storage.ErrOutOfOrderSample):
		return reasonOutOfOrder
	case errors.Is(err, storage.ErrOutOfBounds):
		return reasonOutOfBound
	case errors.Is(err, storage.ErrTooOldSample):
		return reasonTooOld
	default:
		return reasonDuplicate
	}
}

// SampleRejected tells a refusal of one sample (count it, go on with the
// rest) from a failure of the whole append.
func SampleRejected(err error) bool { return sampleRejected(err) }

// rejections counts refused samples by reason and sender, with at most
// maxSenderLabels distinct senders.
type rejections struct {
	vec *prometheus.CounterVec

	mu      sync.Mutex
	senders map[string]bool
}

func newRejections(reg prometheus.Registerer) *rejections {
	r := &rejections{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_samples_rejected_total",
			Help: "Samples the store refused, by reason (too_far_in_future, out_of_order, out_of_bounds, too_old, duplicate) and sender (node, or \"other\" beyond 256 senders).",
		}, []string{"reason", "sender"}),
		senders: map[string]bool{},
	}
	if reg != nil {
		reg.MustRegister(r.vec)
	}
	return r
}

func (r *rejections) add(reason, sender string, n int) {
	if n <= 0 {
		return
	}
	r.mu.Lock()
	if !r.senders[sender] {
		if len(r.senders) >= maxSenderLabels || sender == "" {
			sender = "other"
		} else {
			r.senders[sender] = true
		}
	}
	r.mu.Unlock()
	r.vec.WithLabelValues(reason, sender).Add(float64(n))
}

// tooFar returns a FutureError if ts (ms) is beyond the limit, else nil.
func (s *Store) tooFar(ts int64) error {
	now := s.now()
	if ts <= now.Add(s.opts.MaxFuture).UnixMilli() {
		return nil
	}
	return &FutureError{T: time.UnixMilli(ts), Now: now, Limit: s.opts.MaxFuture}
}

// refuseFuture refuses a whole tick of node at ts when it is too far
// ahead; every sample counts as rejected.
func (s *Store) refuseFuture(node string, ts int64, n int) error {
	err := s.tooFar(ts)
	if err == nil {
		return nil
	}
	s.rejected.Add(uint64(n))
	s.rejects.add(reasonFuture, node, n)
	return &RejectedError{Node: node, Rejected: n, Total: n, First: err}
}

// boundedAppender refuses samples too far ahead and counts every refusal
// of the appenders it wraps (remote write), by the series' node label.
type boundedAppender struct {
	storage.Appender
	s *Store
}

func (a boundedAppender) Append(ref storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	if err := a.s.tooFar(t); err != nil {
		a.s.rejected.Add(1)
		a.s.rejects.add(reasonFuture, senderOf(l), 1)
		return 0, err
	}
	nr, err := a.Appender.Append(ref, l, t, v)
	if err != nil && sampleRejected(err) {
		a.s.rejected.Add(1)
		a.s.rejects.add(rejectReason(err), senderOf(l), 1)
	}
	return nr, err
}

// senderOf names who sent a series for the rejection counter.
func senderOf(l labels.Labels) string {
	if n := l.Get(NodeLabel); n != "" {
		return n
	}
	if n := l.Get("instance"); n != "" {
		return n
	}
	return "remote_write"
}

// repairFuture drops what a data directory holds beyond cut (the start-up
// time, ms) when the head or a block reaches past limit: the head's data up
// to cut is written into a block, blocks reaching past cut are rewritten
// without the later samples, and the WAL goes (its future samples would
// poison the head again). It returns whether it changed anything, after
// which db is closed and must be reopened.
func repairFuture(db *tsdb.DB, dir string, cut, limit int64, log *slog.Logger) (bool, error) {
	h := db.Head()
	var bad []*tsdb.Block
	for _, b := range db.Blocks() {
		if b.Meta().MaxTime > limit {
			bad = append(bad, b)
		}
	}
	if h.MaxTime() <= limit && len(bad) == 0 {
		return false, nil
	}
	log.Warn("data directory holds samples from the future (a sender's clock ran ahead before time bounds existed): keeping what is older than the start-up time, dropping the rest and the WAL",
		"dir", dir, "head_max_time", time.UnixMilli(h.MaxTime()).UTC(), "future_blocks", len(bad), "cut", time.UnixMilli(cut).UTC())
	comp, err := tsdb.NewLeveledCompactor(context.Background(), nil, log, tsdb.ExponentialBlockRanges(tsdb.DefaultBlockDuration, 3, 5), chunkenc.NewPool(), nil)
	if err != nil {
		return false, fmt.Errorf("store: repair %s: %w", dir, err)
	}
	// The block writer trims chunks to [mint, maxt), so only what is
	// older than cut is kept.
	if h.NumSeries() > 0 && h.MinTime() <= cut {
		if _, err := comp.Write(dir, tsdb.NewRangeHead(h, h.MinTime(), cut), h.MinTime(), cut+1, nil); err != nil {
			return false, fmt.Errorf("store: repair %s: persist head: %w", dir, err)
		}
	}
	var remove []string
	for _, b := range bad {
		m := b.Meta()
		if m.MinTime <= cut {
			if _, err := comp.Write(dir, b, m.MinTime, cut+1, &m); err != nil {
				return false, fmt.Errorf("store: repair %s: rewrite block %s: %w", dir, m.ULID, err)
			}
		}
		remove = append(remove, b.Dir())
	}
	if err := db.Close(); err != nil {
		return false, fmt.Errorf("store: repair %s: close: %w", dir, err)
	}
	remove = append(remove, filepath.Join(dir, "wal"), filepath.Join(dir, "wbl"), filepath.Join(dir, "chunks_head"))
	for _, p := range remove {
		if err := os.RemoveAll(p); err != nil {
			return false, fmt.Errorf("store: repair %s: %w", dir, err)
		}
	}
	return true, nil
}

// AppendNodeGauge stores name{node=nodes[i]} (and the target labels, see
// targets.go) = values[i] at t for every
// node in one commit: per-node values the server computes itself (clock
// offsets), not the nodes' ticks. Refused samples are counted and the
// first is returned in a RejectedError; the rest are committed.
func (s *Store) AppendNodeGauge(name string, t time.Time, nodes []string, values []float64) error {
	if len(nodes) != len(values) {
		return fmt.Errorf("store: append %s: %d nodes but %d values", name, len(nodes), len(values))
	}
	app := s.Appender(context.Background())
	ts := t.UnixMilli()
	var rej *RejectedError
	for i, n := range nodes {
		if n == "" {
			continue
		}
		l, err := s.seriesLabels(n, &metric.Desc{Name: name}) // with job and instance, as the node's own series
		if err != nil {
			_ = app.Rollback()
			return err
		}
		if _, err := app.Append(0, l, ts, values[i]); err != nil {
			if !sampleRejected(err) {
				_ = app.Rollback()
				return fmt.Errorf("store: append %s: %w", l, err)
			}
			if rej == nil {
				rej = &RejectedError{Node: n, Total: len(nodes), First: fmt.Errorf("%s: %w", l, err)}
			}
			rej.Rejected++
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("store: commit %s: %w", name, err)
	}
	if rej != nil {
		return rej
	}
	return nil
}
