package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// Durability: a sample is acknowledged only once committed, and a store
// that cannot write refuses appends instead of half-writing them.
//
// The TSDB's WAL keeps a page in memory; a write that fails (ENOSPC, EIO)
// can leave a record torn in it, and once the disk has room again the next
// commit writes that torn record followed by good ones. On the next start
// the WAL repair cuts the log at the torn record and deletes every later
// segment: acknowledged data lost. So the store never lets a commit follow
// a failed one on the same TSDB: commits are serialised with the failure
// check, a failure makes the store read-only, and it becomes writable again
// only by reopening the TSDB, whose repair then cuts just the torn tail.
// Besides, a watcher keeps MinFreeBytes free on the data directory's file
// system, so a filling disk normally stops appends before any write fails
// (the TSDB panics on a failed head-chunk write, which no caller can catch).

// Defaults for the durability options.
const (
	// DefaultMinFreeBytes is the free space below which appends stop: more
	// than the TSDB writes between two checks (a 4 MiB head-chunk buffer,
	// WAL pages) with room for a compaction's index.
	DefaultMinFreeBytes = 128 << 20
	// DefaultCheckInterval is how often free space is checked and a
	// failed store reopened.
	DefaultCheckInterval = time.Second
)

// ErrNotWritable matches (errors.Is) the errors of appends refused because
// the store cannot write now: the disk is (nearly) full or a write failed.
// They are temporary: the same append succeeds once the store recovers.
var ErrNotWritable = errors.New("store not writable")

// NotWritableError says why appends are refused.
type NotWritableError struct {
	Reason string // "disk_full" or "io_error"
	Err    error
}

func (e *NotWritableError) Error() string {
	return fmt.Sprintf("store: not writable (%s): %v", e.Reason, e.Err)
}

func (e *NotWritableError) Unwrap() error        { return e.Err }
func (e *NotWritableError) Is(target error) bool { return target == ErrNotWritable }

// Temporary reports that the append may be retried: senders keep the data.
func (e *NotWritableError) Temporary() bool { return true }

// generation is one open TSDB; a reopen after a failed write makes a new
// one. Appenders remember theirs, so one begun before a reopen cannot
// commit into the closed TSDB.
type generation struct {
	db     *tsdb.DB
	closed bool // guarded by durable.commitMu
	// walFails reads how many WAL and WBL writes of db failed; walBase is
	// its value when db was opened (see commit).
	walFails func() float64
	walBase  float64
}

// newGeneration wraps a TSDB just opened with the registerer reg.
func newGeneration(db *tsdb.DB, reg *trackingRegisterer) *generation {
	g := &generation{db: db, walFails: reg.writeFailures()}
	g.walBase = g.walFails()
	return g
}

// errOtherWriteFailed refuses a commit that ran while another one's WAL
// write failed.
var errOtherWriteFailed = errors.New("another commit's write to the WAL failed meanwhile")

type durable struct {
	// commitMu is held shared by commits and rollbacks, and exclusively by
	// a reopen and Close.
	commitMu sync.RWMutex
	// inflight counts commits and rollbacks from their start to the end of
	// their failure handling; started numbers them (see commit).
	inflight atomic.Int64
	started  atomic.Uint64
	writable atomic.Bool

	mu     sync.Mutex // guards the fields below
	state  *NotWritableError
	failed bool   // a write failed: reopen before writing again
	logged string // the state last logged: "" writable, else its reason
	// reopenAt delays the next reopen by backoff, which doubles while
	// writes keep failing and resets once one commits.
	reopenAt time.Time
	backoff  time.Duration
	okSince  atomic.Bool // a commit succeeded since the last reopen

	free     prometheus.Gauge
	wgauge   prometheus.Gauge
	failures *prometheus.CounterVec
	reopens  prometheus.Counter

	cancel context.CancelFunc
	done   chan struct{}
}

func (s *Store) initDurable() {
	d := &s.dur
	d.free = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vigil_store_free_bytes", Help: "Free bytes on the file system of the store's data directory."})
	d.wgauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vigil_store_writable", Help: "1 if the store accepts appends, 0 while read-only (disk full or a failed write)."})
	d.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_store_append_failures_total",
		Help: "Appends not stored: disk_full and io_error are failed commits, not_writable appends refused while read-only."},
		[]string{"reason"})
	d.reopens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vigil_store_reopens_total", Help: "Times the TSDB was reopened to recover from a failed write."})
	for _, r := range []string{"disk_full", "io_error", "not_writable"} {
		d.failures.WithLabelValues(r)
	}
	if r := s.opts.Registerer; r != nil {
		r.MustRegister(d.free, d.wgauge, d.failures, d.reopens)
	}
}

// tdb is the current TSDB.
func (s *Store) tdb() *tsdb.DB { return s.gen.Load().db }

// Writable returns nil when appends are accepted, else a *NotWritableError
// saying why.
func (s *Store) Writable() error {
	if s.dur.writable.Load() {
		return nil
	}
	s.dur.mu.Lock()
	defer s.dur.mu.Unlock()
	if s.dur.state == nil {
		return &NotWritableError{Reason: "io_error", Err: errors.New("store closed")}
	}
	return s.dur.state
}

// refuse counts and returns the error of an append refused while read-only;
// never nil, even if the store turned writable meanwhile.
func (s *Store) refuse() error {
	s.dur.failures.WithLabelValues("not_writable").Inc()
	if err := s.Writable(); err != nil {
		return err
	}
	return &NotWritableError{Reason: "io_error", Err: errors.New("store reopened during the append")}
}

// begin returns an appender on the current TSDB, or the error saying why
// appends are refused. Checking first keeps a read-only store from creating
// series, which the TSDB logs to the WAL even when the append is rolled back.
func (s *Store) begin(ctx context.Context) (storage.Appender, *generation, error) {
	if !s.dur.writable.Load() {
		return nil, nil, s.refuse()
	}
	g := s.gen.Load()
	return g.db.Appender(ctx), g, nil
}

// commit commits app, begun on g, unless the store stopped being writable
// meanwhile. A failed commit or rollback makes the store read-only until
// it has been reopened.
//
// Commits run concurrently; the TSDB writes their WAL records one after
// another. After a failed WAL write a torn record may stand before what a
// later commit wrote, and reopening cuts the log at the torn record. So a
// commit counts as stored only while this TSDB's WAL has never failed a
// write: the TSDB raises its failure counter under the WAL's lock, before
// any later commit's write, so such a commit sees it and is refused (not
// acknowledged; the sender keeps and resends it). Reading the counter costs
// a goroutine, so a commit that ran alone skips it: no other write could
// fail meanwhile, and one that failed before had made the store read-only
// before this commit began (it stays in flight until then).
func (s *Store) commit(app storage.Appender, g *generation) error {
	s.dur.commitMu.RLock()
	defer s.dur.commitMu.RUnlock()
	seq := s.dur.started.Add(1)
	alone := s.dur.inflight.Add(1) == 1
	defer s.dur.inflight.Add(-1)
	if !s.dur.writable.Load() || s.gen.Load() != g {
		if err := app.Rollback(); err != nil && !g.closed {
			return s.writeFailed(err)
		}
		return s.refuse()
	}
	if err := app.Commit(); err != nil {
		return s.writeFailed(err)
	}
	if !(alone && s.dur.started.Load() == seq) && g.walFails() != g.walBase {
		return s.writeFailed(errOtherWriteFailed)
	}
	if !s.dur.okSince.Load() {
		s.dur.okSince.Store(true)
		s.dur.mu.Lock()
		s.dur.backoff = 0
		s.dur.mu.Unlock()
	}
	return nil
}

// rollback rolls app back; a rollback writes the new series to the WAL and
// can fail like a commit.
func (s *Store) rollback(app storage.Appender, g *generation) {
	s.dur.commitMu.RLock()
	defer s.dur.commitMu.RUnlock()
	s.dur.started.Add(1)
	s.dur.inflight.Add(1)
	defer s.dur.inflight.Add(-1)
	if err := app.Rollback(); err != nil && s.gen.Load() == g && !g.closed {
		_ = s.writeFailed(err)
	}
}

// writeFailed records a failed WAL write (or a commit refused because
// another one's failed: counted as not_writable) and makes the store
// read-only until it is reopened.
func (s *Store) writeFailed(err error) error {
	reason := "io_error"
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		reason = "disk_full"
	}
	if errors.Is(err, errOtherWriteFailed) {
		s.dur.failures.WithLabelValues("not_writable").Inc()
	} else {
		s.dur.failures.WithLabelValues(reason).Inc()
	}
	nw := &NotWritableError{Reason: reason, Err: fmt.Errorf("write failed, read-only until the store is reopened: %w", err)}
	s.dur.mu.Lock()
	s.dur.failed = true
	s.setStateLocked(nw)
	s.dur.mu.Unlock()
	return nw
}

// setStateLocked makes the store writable (nw nil) or read-only, logging
// each change once. Called with dur.mu held.
func (s *Store) setStateLocked(nw *NotWritableError) {
	d := &s.dur
	d.state = nw
	d.writable.Store(nw == nil)
	// Logged once per kind of state: the free bytes in the message
	// change on every check.
	msg := ""
	if nw != nil {
		msg = nw.Reason
		if d.failed {
			msg += "/failed"
		}
		d.wgauge.Set(0)
	} else {
		d.wgauge.Set(1)
	}
	if msg == d.logged {
		return
	}
	was := d.logged
	d.logged = msg
	switch {
	case nw != nil:
		s.log.Error("store read-only: appends refused, senders keep their data", "reason", nw.Reason, "err", nw.Err)
	case was != "":
		s.log.Info("store writable again")
	}
}

// startWatch checks the free space now and then every interval, in the
// background until Close.
func (s *Store) startWatch() {
	ctx, cancel := context.WithCancel(context.Background())
	s.dur.cancel, s.dur.done = cancel, make(chan struct{})
	s.check()
	go func() {
		defer close(s.dur.done)
		t := time.NewTicker(s.opts.CheckInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.check()
			}
		}
	}()
}

func (s *Store) stopWatch() {
	if s.dur.cancel != nil {
		s.dur.cancel()
		<-s.dur.done
	}
}

// check turns the store read-only while free space is below MinFreeBytes,
// reopens it after a failed write once there is room, and makes it
// writable again.
func (s *Store) check() {
	var low error
	free, ferr := freeBytes(s.opts.Dir)
	if ferr == nil {
		s.dur.free.Set(float64(free))
		if s.opts.MinFreeBytes > 0 && free < s.opts.MinFreeBytes {
			low = fmt.Errorf("%d bytes free on the file system of %s, less than the %d kept free (min_free_bytes)", free, s.opts.Dir, s.opts.MinFreeBytes)
		}
	}
	s.dur.mu.Lock()
	failed := s.dur.failed
	if low != nil {
		s.setStateLocked(&NotWritableError{Reason: "disk_full", Err: low})
		s.dur.mu.Unlock()
		return
	}
	if !failed {
		s.setStateLocked(nil)
		s.dur.mu.Unlock()
		return
	}
	// A write failed. Reopening replays the WAL, so not while the disk is
	// still full, and after repeated failures (a broken disk) less often.
	now := time.Now()
	wait := now.Before(s.dur.reopenAt) ||
		(s.dur.state != nil && s.dur.state.Reason == "disk_full" && ferr == nil && free < reopenMinFree)
	if !wait {
		s.dur.backoff = min(max(2*s.dur.backoff, s.opts.CheckInterval), time.Minute)
		s.dur.reopenAt = now.Add(s.dur.backoff)
	}
	s.dur.mu.Unlock()
	if !wait {
		s.reopen()
	}
}

// reopenMinFree is the free space a store made read-only by a full disk
// waits for before reopening (when MinFreeBytes is lower).
const reopenMinFree = 1 << 20

// reopen closes the TSDB after a failed write and opens it again; the open
// replays the WAL and cuts a torn tail, keeping every record before it.
func (s *Store) reopen() {
	s.dur.commitMu.Lock()
	defer s.dur.commitMu.Unlock()
	g := s.gen.Load()
	if !g.closed {
		if err := g.db.Close(); err != nil {
			s.log.Warn("closing the store after a failed write", "err", err)
		}
		g.closed = true
	}
	db, err := s.openTSDB()
	if err != nil {
		s.dur.mu.Lock()
		s.setStateLocked(&NotWritableError{Reason: "io_error", Err: fmt.Errorf("reopen after a failed write: %w", err)})
		s.dur.mu.Unlock()
		return
	}
	// Cached series references belong to the old head.
	s.mu.Lock()
	s.nodes = map[string]*nodeCache{}
	s.cached = 0
	s.mu.Unlock()
	s.gen.Store(newGeneration(db, s.currentTSDBRegisterer()))
	s.dur.okSince.Store(false)
	s.dur.reopens.Inc()
	s.dur.mu.Lock()
	s.dur.failed = false
	s.setStateLocked(nil)
	s.dur.mu.Unlock()
}

// guardedAppender commits through Store.commit, for remote write.
type guardedAppender struct {
	storage.Appender
	s *Store
	g *generation
}

func (a guardedAppender) Commit() error { return a.s.commit(a.Appender, a.g) }
func (a guardedAppender) Rollback() error {
	a.s.rollback(a.Appender, a.g)
	return nil
}

// refusingAppender is handed out while the store is read-only: it touches
// no TSDB and fails every call, so remote-write senders retry.
type refusingAppender struct{ err error }

func (a refusingAppender) Append(storage.SeriesRef, labels.Labels, int64, float64) (storage.SeriesRef, error) {
	return 0, a.err
}
func (a refusingAppender) AppendExemplar(storage.SeriesRef, labels.Labels, exemplar.Exemplar) (storage.SeriesRef, error) {
	return 0, a.err
}
func (a refusingAppender) AppendHistogram(storage.SeriesRef, labels.Labels, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, a.err
}
func (a refusingAppender) AppendHistogramCTZeroSample(storage.SeriesRef, labels.Labels, int64, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, a.err
}
func (a refusingAppender) UpdateMetadata(storage.SeriesRef, labels.Labels, metadata.Metadata) (storage.SeriesRef, error) {
	return 0, a.err
}
func (a refusingAppender) AppendCTZeroSample(storage.SeriesRef, labels.Labels, int64, int64) (storage.SeriesRef, error) {
	return 0, a.err
}
func (a refusingAppender) SetOptions(*storage.AppendOptions) {}
func (a refusingAppender) Commit() error                     { return a.err }
func (a refusingAppender) Rollback() error                   { return nil }
