// Package store is Vigil's time-series storage: a thin wrapper over the
// Prometheus TSDB (WAL, head block, compaction, retention). It is the only
// package that imports prometheus/tsdb, because upstream does not promise a
// stable library API; everything else talks to the methods below and to the
// storage.Queryable it exposes.
package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/compression"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// NodeLabel is the label every series appended through AppendTick and
// SetUp carries, except where a plugin's own label has that name
// (targets.go).
const NodeLabel = metric.NodeLabel

// upDesc describes the up series SetUp and AppendTick (with up) write;
// read only.
var upDesc = metric.NewDesc("up", "1 if the node is sending, 0 if it is down.", metric.Gauge)

// Defaults for Options fields left zero.
const (
	DefaultRetention       = 15 * 24 * time.Hour
	DefaultMaxCachedSeries = 4 << 20
	// DefaultCacheIdle is how long a node's cached series references
	// survive without an append before the sweep drops them.
	DefaultCacheIdle = 15 * time.Minute
	// staleLookback bounds how far back Gap looks for a series' last
	// sample; it matches PromQL's default lookback delta, beyond which a
	// series is invisible anyway.
	staleLookback = 5 * time.Minute
	// DefaultSamplesPerChunk is 4 minutes at 1 Hz. Prometheus uses 120
	// (2 minutes at its usual 15 s scrape interval that is 30 minutes);
	// at Vigil's 1 Hz, 240 halves the per-chunk overhead (0.1 bytes a
	// sample) while a read of the newest samples still decodes at most 240.
	DefaultSamplesPerChunk = 240
)

// Options configure a Store.
type Options struct {
	// Dir holds the blocks and the WAL; it is created if missing.
	Dir string
	// Retention drops blocks older than this (0: DefaultRetention).
	Retention time.Duration
	// MaxBytes drops the oldest blocks while the blocks exceed this size
	// (0: no size limit). The WAL is not counted, as in Prometheus.
	MaxBytes int64
	// OutOfOrderWindow accepts samples up to this much older than the
	// newest sample of their series (0: reject them). Aggregators that
	// replay buffered ticks after an outage need it.
	OutOfOrderWindow time.Duration
	// MaxCachedSeries bounds the series-reference cache of AppendTick
	// (0: DefaultMaxCachedSeries). Beyond it new series are appended
	// without caching: correct, only slower.
	MaxCachedSeries int
	// CacheIdle drops a node's cache after this long without appends
	// (0: DefaultCacheIdle), so descriptors of vanished nodes are freed.
	CacheIdle time.Duration
	// Job is the job label of every series AppendTick and SetUp write,
	// beside instance=NODE (targets.go); empty: neither label, only node.
	Job string
	// MaxMetadata bounds the number of metric names whose HELP and TYPE
	// are kept for /api/v1/metadata (0: 100,000).
	MaxMetadata int
	// SamplesPerChunk is how many samples the TSDB puts in a chunk
	// (0: DefaultSamplesPerChunk). Each chunk repeats a full timestamp and
	// value and has its own header and index entry, about 25 bytes.
	SamplesPerChunk int
	// MaxFuture refuses samples more than this ahead of the server's
	// clock (0: DefaultMaxFuture); see timebounds.go.
	MaxFuture time.Duration
	// MinFreeBytes is the free space kept on the data directory's file
	// system: below it the store turns read-only (appends fail with
	// ErrNotWritable) until there is room again (0: DefaultMinFreeBytes;
	// negative: no check).
	MinFreeBytes int64
	// CheckInterval is how often free space is checked and a store made
	// read-only by a failed write reopened (0: DefaultCheckInterval).
	CheckInterval time.Duration
	// Registerer receives the store's vigil_* metrics and the TSDB's
	// prometheus_tsdb_* metrics (nil: none).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Metadata is the HELP/TYPE information of one metric name.
type Metadata struct {
	Type string // gauge, counter, untyped, ...
	Help string
	Unit string
}

// Store is safe for concurrent use.
type Store struct {
	gen    atomic.Pointer[generation] // the open TSDB (durable.go)
	dur    durable
	log    *slog.Logger
	opts   Options
	scaled bool // integer storage of decimalScales metrics (scale.go)

	tsdbRegMu sync.Mutex
	tsdbReg   *trackingRegisterer // the open TSDB's collectors (registry.go)

	limits *seriesLimiter // nil: no series limits (limits.go)

	mu     sync.Mutex // guards nodes, cached, meta
	nodes  map[string]*nodeCache
	cached int
	meta   map[string]Metadata

	ticks    atomic.Uint64
	rejected atomic.Uint64
	gaps     atomic.Uint64
	unscaled atomic.Uint64 // samples of scaled metrics stored in twins
	rejects  *rejections
	now      func() time.Time // the server's clock, for the time bounds
}

// nodeCache holds the series references of one node. Its mutex is held for
// a whole tick, which also keeps one node's ticks in order.
type nodeCache struct {
	mu       sync.Mutex
	series   map[*metric.Desc]*seriesRef
	up       seriesRef
	lastUsed time.Time // wall clock of the last append, for the idle sweep
	// gen numbers the sweep periods of at least CacheIdle since genAt;
	// an entry not used in a whole period (a finished process's or job's
	// series) is dropped, so churning series do not fill the cache.
	gen   uint32
	genAt time.Time
}

// seriesRef is what steady-state appends need: the TSDB's reference and
// the label set to fall back on if the reference went stale after head GC.
type seriesRef struct {
	ref  storage.SeriesRef
	lset labels.Labels
	dec  *decimal   // stored as integers (scale.go); nil: as they are
	twin *seriesRef // where values dec cannot represent go; made on first use
	seen uint32     // the node's gen when last appended to
}

// Open opens (or creates) the store in opts.Dir, replaying the WAL.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("store: no data directory given")
	}
	if opts.Retention < 0 || opts.MaxBytes < 0 || opts.OutOfOrderWindow < 0 || opts.MaxCachedSeries < 0 || opts.CacheIdle < 0 || opts.MaxMetadata < 0 || opts.SamplesPerChunk < 0 || opts.MaxFuture < 0 {
		return nil, errors.New("store: negative retention, size, window, chunk size, cache bound or future limit")
	}
	if opts.MaxFuture == 0 {
		opts.MaxFuture = DefaultMaxFuture
	}
	if opts.SamplesPerChunk == 0 {
		opts.SamplesPerChunk = DefaultSamplesPerChunk
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.MaxCachedSeries == 0 {
		opts.MaxCachedSeries = DefaultMaxCachedSeries
	}
	if opts.CacheIdle == 0 {
		opts.CacheIdle = DefaultCacheIdle
	}
	if opts.MaxMetadata == 0 {
		opts.MaxMetadata = 100_000
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MinFreeBytes == 0 {
		opts.MinFreeBytes = DefaultMinFreeBytes
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	scaled, err := dataFormat(opts.Dir, opts.Logger)
	if err != nil {
		return nil, err
	}
	s := &Store{
		scaled: scaled,
		log:    opts.Logger,
		opts:   opts,
		nodes:  map[string]*nodeCache{},
		meta:   map[string]Metadata{},
	}
	s.rejects, s.now = newRejections(opts.Registerer), time.Now
	s.initDurable()
	db, err := s.openTSDB()
	if err != nil {
		return nil, err
	}
	s.gen.Store(newGeneration(db, s.currentTSDBRegisterer()))
	s.startWatch()
	if n, err := s.retireUntargeted(time.Now()); err != nil {
		s.log.Warn("series of an older Vigil without job and instance not marked stale", "err", err)
	} else if n > 0 {
		s.log.Info("recent series without job and instance (an older Vigil's) marked stale; new ones carry them", "series", n)
	}
	return s, nil
}

func (s *Store) openTSDB() (*tsdb.DB, error) {
	opts := s.opts
	to := tsdb.DefaultOptions()
	to.RetentionDuration = opts.Retention.Milliseconds()
	to.MaxBytes = opts.MaxBytes
	to.OutOfOrderTimeWindow = opts.OutOfOrderWindow.Milliseconds()
	to.WALCompression = compression.Snappy
	to.SamplesPerChunk = opts.SamplesPerChunk
	// Isolation keeps, per series, a ring of the appends newer than the
	// oldest open reader, and the ring never shrinks. At 1 Hz one commit
	// per node a second lands in every ring while a reader runs, so a
	// 60-second query or rollup pass left 60 entries in each of 170,000
	// rings (85 MB at 512 nodes, for good). Without it a query may see
	// part of a node's latest tick, which PromQL's lookback hides.
	to.IsolationDisabled = true
	if err := repairLogs(opts.Dir, opts.Logger); err != nil {
		return nil, err
	}
	db, err := tsdb.Open(opts.Dir, opts.Logger.With("component", "tsdb"), s.tsdbRegisterer(), to, nil)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", opts.Dir, err)
	}
	start := time.Now()
	repaired, err := repairFuture(db, opts.Dir, start.UnixMilli(), start.Add(opts.MaxFuture).UnixMilli(), opts.Logger)
	if err != nil {
		db.Close()
		return nil, err
	}
	if repaired {
		if db, err = tsdb.Open(opts.Dir, opts.Logger.With("component", "tsdb"), s.tsdbRegisterer(), to, nil); err != nil {
			return nil, fmt.Errorf("store: reopen %s after dropping future samples: %w", opts.Dir, err)
		}
	}
	return db, nil
}

// Close flushes and closes the database.
func (s *Store) Close() error {
	s.stopWatch()
	s.dur.commitMu.Lock()
	defer s.dur.commitMu.Unlock()
	s.dur.writable.Store(false)
	g := s.gen.Load()
	if g.closed {
		return nil
	}
	g.closed = true
	if err := g.db.Close(); err != nil {
		return fmt.Errorf("store: close %s: %w", s.opts.Dir, err)
	}
	return nil
}

// Querier makes Store a storage.Queryable for the query engine.
func (s *Store) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := s.tdb().Querier(mint, maxt)
	if err != nil {
		return nil, err
	}
	if !s.scaled {
		return q, nil
	}
	return scaledQuerier{q}, nil
}

// Appender returns an appender for ingest paths that carry their own
// label sets (remote write). The caller must Commit or Rollback it.
// While the store is read-only every call fails with ErrNotWritable.
func (s *Store) Appender(ctx context.Context) storage.Appender {
	app, g, err := s.begin(ctx)
	if err != nil {
		return refusingAppender{err}
	}
	if s.scaled {
		app = scaledAppender{Appender: app, s: s}
	}
	// Future samples are refused before they reach the TSDB (timebounds.go).
	return boundedAppender{Appender: guardedAppender{Appender: app, s: s, g: g}, s: s}
}

// RejectedError reports samples the TSDB refused (out of order, duplicate
// timestamp, too old) while the rest of the tick was committed. errors.Is
// matches the first refusal, e.g. storage.ErrOutOfOrderSample.
type RejectedError struct {
	Node     string
	Rejected int
	Total    int
	First    error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("store: node %q: %d of %d samples rejected, first: %v", e.Node, e.Rejected, e.Total, e.First)
}

func (e *RejectedError) Unwrap() error { return e.First }

// sampleRejected tells per-sample refusals (skip and count) from failures
// of the whole append.
func sampleRejected(err error) bool {
	return errors.Is(err, ErrTooFarInFuture) || errors.Is(err, storage.ErrOutOfOrderSample) || errors.Is(err, storage.ErrOutOfBounds) ||
		errors.Is(err, storage.ErrTooOldSample) || errors.Is(err, storage.ErrDuplicateSampleForTimestamp)
}

// AppendTick stores one tick of one node: values[i] is the value of
// descs[i], each series labelled node=NODE, and with up also up{node}=1
// (a live node's tick, as ingest stores it). It commits once. Descriptors
// are cached by pointer, so a steady-state tick builds no label sets; the
// caller keeps descs alive and unchanged, as metric.Desc requires.
func (s *Store) AppendTick(node string, t time.Time, descs []*metric.Desc, values []float64, up bool) error {
	if node == "" {
		return errors.New("store: append tick: empty node name")
	}
	if len(descs) != len(values) {
		return fmt.Errorf("store: append tick for node %q: %d descriptors but %d values", node, len(descs), len(values))
	}
	ts := t.UnixMilli()
	total := len(descs)
	if up {
		total++
	}
	if err := s.refuseFuture(node, ts, total); err != nil {
		return err
	}
	nc := s.node(node)
	nc.mu.Lock()
	defer nc.mu.Unlock()
	nc.lastUsed = time.Now()
	app, g, err := s.begin(context.Background())
	if err != nil {
		return err
	}
	var rej *RejectedError
	var again []resent
	for i := range total {
		d, v := upDesc, 1.0
		if i < len(descs) {
			d, v = descs[i], values[i]
		}
		sr, err := s.ref(nc, node, d)
		if err != nil {
			s.rollback(app, g)
			return err
		}
		sr.seen = nc.gen
		if sr.dec != nil {
			if j, ok := sr.dec.encode(v); ok {
				v = j
			} else {
				if sr.twin == nil {
					sr.twin = &seriesRef{lset: twinLabels(sr.lset)}
				}
				sr = sr.twin
				s.unscaled.Add(1)
			}
		}
		if sr.ref == 0 && s.AdmitSeries(app, PathWire, node, sr.lset) != nil {
			continue // a new series over the limit: counted and logged there
		}
		ref, err := app.Append(sr.ref, sr.lset, ts, v)
		switch {
		case err == nil:
			if ref != 0 {
				sr.ref = ref
			}
		case olderThanHead(err):
			// Maybe a tick sent again (its acknowledgement was lost):
			// judged against what is stored once committed.
			again = append(again, resent{sr.lset, v, err})
		case sampleRejected(err):
			rej = rej.add(s, node, total, sr.lset, err)
		default:
			s.rollback(app, g)
			return fmt.Errorf("store: append %s: %w", sr.lset, err)
		}
	}
	if err := s.commit(app, g); err != nil {
		return err // already says why; the node adds nothing a retry needs
	}
	if len(again) > 0 {
		stored, err := s.storedAt(g, node, ts, again)
		if err != nil {
			return err
		}
		for i, r := range again {
			if !stored[i] {
				rej = rej.add(s, node, total, r.lset, r.err)
			}
		}
	}
	if n := s.ticks.Add(1); n%4096 == 0 {
		s.sweep()
	}
	if rej != nil {
		s.rejected.Add(uint64(rej.Rejected))
		return rej
	}
	return nil
}

// add counts one refused sample of an AppendTick of total samples,
// creating the error on the first.
func (e *RejectedError) add(s *Store, node string, total int, lset labels.Labels, err error) *RejectedError {
	if e == nil {
		e = &RejectedError{Node: node, Total: total, First: fmt.Errorf("%s: %w", lset, err)}
	}
	e.Rejected++
	s.rejects.add(rejectReason(err), node, 1)
	return e
}

// resent is a sample the head refused as older than its series' latest.
type resent struct {
	lset labels.Labels
	v    float64
	err  error
}

// olderThanHead tells the refusals of a sample older than what its
// series holds: a duplicate of a stored one is not a conflict.
func olderThanHead(err error) bool {
	return errors.Is(err, storage.ErrOutOfOrderSample) || errors.Is(err, storage.ErrTooOldSample) || errors.Is(err, storage.ErrOutOfBounds)
}

// storedAt reports for each of again whether the store already holds that
// very sample (same series, time and value bits): a tick a sender sent
// again after a lost connection, whose first copy was committed but not
// acknowledged. Those count as stored. It reads the node's series at ts.
func (s *Store) storedAt(g *generation, node string, ts int64, again []resent) ([]bool, error) {
	q, err := g.db.Querier(ts, ts)
	if err != nil {
		return nil, fmt.Errorf("store: node %q: read back a tick sent again: %w", node, err)
	}
	defer q.Close()
	byHash := make(map[uint64][]int, len(again))
	for i, r := range again {
		h := r.lset.Hash()
		byHash[h] = append(byHash[h], i)
	}
	stored := make([]bool, len(again))
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, node))
	var it chunkenc.Iterator
	for set.Next() {
		series := set.At()
		lset := series.Labels()
		for _, i := range byHash[lset.Hash()] {
			if !labels.Equal(lset, again[i].lset) {
				continue
			}
			it = series.Iterator(it)
			if it.Seek(ts) == chunkenc.ValFloat {
				t, v := it.At()
				stored[i] = t == ts && math.Float64bits(v) == math.Float64bits(again[i].v)
			}
		}
	}
	return stored, set.Err()
}

// SetUp writes up{node=NODE} as 1 or 0 at t.
func (s *Store) SetUp(node string, t time.Time, up bool) error {
	if node == "" {
		return errors.New("store: set up: empty node name")
	}
	if err := s.refuseFuture(node, t.UnixMilli(), 1); err != nil {
		return err
	}
	nc := s.node(node)
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if nc.up.lset.IsEmpty() {
		lset, err := s.seriesLabels(node, upDesc)
		if err != nil {
			return err
		}
		nc.up.lset = lset
	}
	v := 0.0
	if up {
		v = 1
	}
	app, g, err := s.begin(context.Background())
	if err != nil {
		return err
	}
	ref, err := app.Append(nc.up.ref, nc.up.lset, t.UnixMilli(), v)
	if err != nil {
		s.rollback(app, g)
		if sampleRejected(err) {
			s.rejected.Add(1)
			s.rejects.add(rejectReason(err), node, 1)
		}
		return fmt.Errorf("store: append %s: %w", nc.up.lset, err)
	}
	nc.up.ref = ref
	if err := s.commit(app, g); err != nil {
		return err
	}
	return nil
}

// Gap records that NODE sent nothing between from and to (inclusive: the
// ticks stamped from through to were lost): every series of
// the node whose last sample lies before from (within the lookback window)
// gets a stale marker at from, so PromQL shows the gap as missing data
// instead of carrying the last value forward for five minutes. Series with
// samples at or after from are left alone.
func (s *Store) Gap(node string, from, to time.Time) error {
	if node == "" {
		return errors.New("store: gap: empty node name")
	}
	// from == to is one lost tick, as a client reports a single dropped
	// tick and a decoder a single bad values frame.
	if to.Before(from) {
		return fmt.Errorf("store: gap of node %q: end %s before start %s", node, to.Format(time.RFC3339Nano), from.Format(time.RFC3339Nano))
	}
	ts := from.UnixMilli()
	if err := s.tooFar(ts); err != nil {
		return fmt.Errorf("store: gap of node %q: %w", node, err)
	}
	nc := s.node(node)
	nc.mu.Lock()
	defer nc.mu.Unlock()
	ctx := context.Background()
	app, g, err := s.begin(ctx)
	if err != nil {
		return err
	}
	q, err := g.db.Querier(ts-staleLookback.Milliseconds(), math.MaxInt64)
	if err != nil {
		s.rollback(app, g) // nothing appended yet: nothing to log
		return fmt.Errorf("store: gap of node %q: %w", node, err)
	}
	defer q.Close()
	set := s.nodeSeries(ctx, q, node)
	var it chunkenc.Iterator
	marked := 0
	for set.Next() {
		series := set.At()
		it = series.Iterator(it)
		lastT, lastV, seen := int64(0), 0.0, false
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt == chunkenc.ValFloat {
				lastT, lastV = it.At()
			} else {
				lastT = it.AtT()
				lastV = 0
			}
			seen = true
		}
		if err := it.Err(); err != nil {
			s.rollback(app, g)
			return fmt.Errorf("store: gap of node %q: read %s: %w", node, series.Labels(), err)
		}
		if !seen || lastT >= ts || value.IsStaleNaN(lastV) {
			continue
		}
		if _, err := app.Append(0, series.Labels(), ts, math.Float64frombits(value.StaleNaN)); err != nil && !sampleRejected(err) {
			s.rollback(app, g)
			return fmt.Errorf("store: gap of node %q: mark %s stale: %w", node, series.Labels(), err)
		}
		marked++
	}
	if err := set.Err(); err != nil {
		s.rollback(app, g)
		return fmt.Errorf("store: gap of node %q: select: %w", node, err)
	}
	if err := s.commit(app, g); err != nil {
		return err
	}
	s.gaps.Add(1)
	s.log.Debug("gap recorded", "node", node, "from", from, "to", to, "series", marked)
	return nil
}

// SetMetadata records HELP/TYPE of a metric name (remote-write metadata).
func (s *Store) SetMetadata(name string, md Metadata) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setMetadataLocked(name, md)
}

func (s *Store) setMetadataLocked(name string, md Metadata) {
	if _, ok := s.meta[name]; !ok && len(s.meta) >= s.opts.MaxMetadata {
		return
	}
	s.meta[name] = md
}

// Metadata returns a copy of the known HELP/TYPE per metric name.
func (s *Store) Metadata() map[string]Metadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Metadata, len(s.meta))
	for k, v := range s.meta {
		out[k] = v
	}
	return out
}

// Stats are counters of the store since Open.
type Stats struct {
	Ticks, RejectedSamples, Gaps uint64
	// UnscaledSamples counts values of integer-stored metrics that were
	// not exact multiples of their unit and went to twin series.
	UnscaledSamples          uint64
	CachedSeries             int
	HeadSeries               uint64
	HeadMinTime, HeadMaxTime int64
}

// Stats returns the current counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	cached := s.cached
	s.mu.Unlock()
	h := s.tdb().Head()
	return Stats{
		Ticks: s.ticks.Load(), RejectedSamples: s.rejected.Load(), Gaps: s.gaps.Load(),
		UnscaledSamples: s.unscaled.Load(),
		CachedSeries:    cached,
		HeadSeries:      h.NumSeries(), HeadMinTime: h.MinTime(), HeadMaxTime: h.MaxTime(),
	}
}

func (s *Store) node(name string) *nodeCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	nc := s.nodes[name]
	if nc == nil {
		now := time.Now()
		nc = &nodeCache{series: map[*metric.Desc]*seriesRef{}, lastUsed: now, genAt: now}
		s.nodes[name] = nc
	}
	return nc
}

// ref returns the cached reference of (node, d), building the label set the
// first time. Called with nc.mu held.
func (s *Store) ref(nc *nodeCache, node string, d *metric.Desc) (*seriesRef, error) {
	if sr := nc.series[d]; sr != nil {
		return sr, nil
	}
	lset, err := s.seriesLabels(node, d)
	if err != nil {
		return nil, err
	}
	sr := &seriesRef{lset: lset}
	if s.scaled {
		sr.dec = decimalScales[d.Name]
	}
	s.mu.Lock()
	// A node swept meanwhile is an orphan; don't count its entries.
	if s.cached < s.opts.MaxCachedSeries && s.nodes[node] == nc {
		nc.series[d] = sr
		s.cached++
	}
	if _, ok := s.meta[d.Name]; !ok {
		s.setMetadataLocked(d.Name, Metadata{Type: d.Type.String(), Help: d.Help})
	}
	s.mu.Unlock()
	return sr, nil
}

// sweep drops the caches of nodes idle longer than CacheIdle, releasing
// their descriptors, and in other nodes the entries not appended to for a
// whole period of at least CacheIdle, at most maxPrunes nodes a call so
// the store's lock is held briefly. It runs every few thousand ticks.
func (s *Store) sweep() {
	now := time.Now()
	cutoff := now.Add(-s.opts.CacheIdle)
	s.mu.Lock()
	defer s.mu.Unlock()
	pruned := 0
	for name, nc := range s.nodes {
		if !nc.mu.TryLock() {
			continue // busy, so not idle
		}
		switch {
		case nc.lastUsed.Before(cutoff):
			s.cached -= len(nc.series)
			delete(s.nodes, name)
		case nc.genAt.Before(cutoff) && pruned < maxPrunes:
			for d, sr := range nc.series {
				if sr.seen != nc.gen {
					delete(nc.series, d)
					s.cached--
				}
			}
			nc.gen++
			nc.genAt = now
			pruned++
		}
		nc.mu.Unlock()
	}
}

// maxPrunes bounds the nodes one sweep prunes (a few hundred entries each).
const maxPrunes = 256

// --- Hooks for benchmarks and rollups (issue 4). ---

// CompactHead writes everything in the in-memory head into a block now,
// as the TSDB otherwise does once the head spans 3h. Benchmarks use it to
// measure the on-disk size of fresh data.
func (s *Store) CompactHead() error {
	h := s.tdb().Head()
	if h.NumSeries() == 0 {
		return nil
	}
	if err := s.tdb().CompactHead(tsdb.NewRangeHead(h, h.MinTime(), h.MaxTime())); err != nil {
		return fmt.Errorf("store: compact head of %s: %w", s.opts.Dir, err)
	}
	return nil
}

// FillCounter appends, for benchmarks, one counter per node
// (name{node=nodeName(i)}) every second for seconds from t0, rising by a
// few thousand a second with log-normal noise, like context switches.
func (s *Store) FillCounter(name string, nodes, seconds int, t0 time.Time, nodeName func(int) string) error {
	lsets := make([]labels.Labels, nodes)
	refs := make([]storage.SeriesRef, nodes)
	vals := make([]float64, nodes)
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range lsets {
		lsets[n] = labels.FromStrings(labels.MetricName, name, NodeLabel, nodeName(n))
		vals[n] = float64(rng.IntN(1 << 30))
	}
	ctx := context.Background()
	for sec := range seconds {
		ts := t0.Add(time.Duration(sec) * time.Second).UnixMilli()
		app := s.Appender(ctx)
		for n := range lsets {
			vals[n] += math.Round(3000 * math.Exp(rng.NormFloat64()*0.3))
			ref, err := app.Append(refs[n], lsets[n], ts, vals[n])
			if err != nil {
				_ = app.Rollback()
				return fmt.Errorf("store: fill %s: %w", name, err)
			}
			refs[n] = ref
		}
		if err := app.Commit(); err != nil {
			return fmt.Errorf("store: fill %s: %w", name, err)
		}
	}
	return nil
}

// BlockInfo describes one persisted block.
type BlockInfo struct {
	Dir                     string
	MinTime, MaxTime        int64
	Samples, Series, Chunks uint64
	Bytes                   int64 // chunks, index, tombstones and meta
}

// Blocks lists the persisted blocks, oldest first.
func (s *Store) Blocks() []BlockInfo {
	var out []BlockInfo
	for _, b := range s.tdb().Blocks() {
		m := b.Meta()
		out = append(out, BlockInfo{Dir: b.Dir(), MinTime: m.MinTime, MaxTime: m.MaxTime,
			Samples: m.Stats.NumSamples, Series: m.Stats.NumSeries, Chunks: m.Stats.NumChunks, Bytes: b.Size()})
	}
	return out
}

// ChunkStat is the encoded size of one metric's chunks, as stored.
type ChunkStat struct {
	Bytes, Samples, Chunks int
}

// ChunkStats sums the chunk bytes and samples of the persisted blocks by
// metric name (twins under their metric), for benchmarks: where the disk
// goes.
func (s *Store) ChunkStats(ctx context.Context) (map[string]ChunkStat, error) {
	q, err := s.tdb().ChunkQuerier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, fmt.Errorf("store: chunk stats: %w", err)
	}
	defer q.Close()
	out := map[string]ChunkStat{}
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	var it chunks.Iterator
	for set.Next() {
		series := set.At()
		name := series.Labels().Get(labels.MetricName)
		st := out[name]
		it = series.Iterator(it)
		for it.Next() {
			c := it.At().Chunk
			st.Bytes += len(c.Bytes())
			st.Samples += c.NumSamples()
			st.Chunks++
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("store: chunk stats of %s: %w", series.Labels(), err)
		}
		out[name] = st
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("store: chunk stats: %w", err)
	}
	return out, nil
}
