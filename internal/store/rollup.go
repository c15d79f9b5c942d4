package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/compression"
)

// Rollups keep one-minute aggregates of every raw series for much longer
// than the raw data. They live in a second TSDB (RollupOptions.Dir, by
// default <data>/rollup) so each database keeps its own retention and the
// raw one stays exactly what was ingested. A rollup series carries the raw
// series' labels plus RollupLabel naming the aggregate.
const (
	// RollupLabel names the aggregate of a rollup series. It starts with
	// "__", which Prometheus reserves, so it cannot clash with user labels.
	RollupLabel = "__rollup__"
	// RollupStep is the width of one rollup bucket.
	RollupStep = time.Minute

	DefaultRollupRetention = 400 * 24 * time.Hour
	// DefaultRollupDelay leaves late ticks (aggregators replaying after
	// an outage, clock skew) time to land before their minute is rolled.
	DefaultRollupDelay = 30 * time.Second
	// rollupChunk is how much raw time one pass reads. It stays below half
	// the TSDB head's 2h block range, so a catch-up pass appending series
	// after series never writes below the head's appendable window.
	rollupChunk = 30 * time.Minute
	// DefaultRollupEvery is how often Run rolls up the minutes due. Each
	// run writes its rollups as blocks, so rarer runs mean fewer, larger
	// blocks; queries read raw data for the recent past anyway.
	DefaultRollupEvery = 30 * time.Minute
	// rollupBatchSeries bounds the rollup series one block writer holds
	// in memory before it writes them out as a block. Blocks of one pass
	// overlap in time; the TSDB merges them when it compacts.
	rollupBatchSeries = 40_000
	watermarkFile     = "watermark"
)

// The aggregates, each a value of RollupLabel. Each bucket [t, t+1m) is
// stamped t.
const (
	AggMin   = "min"
	AggMax   = "max"
	AggMean  = "mean"
	AggCount = "count"
)

var aggs = [...]string{AggMin, AggMax, AggMean, AggCount}

// RollupOptions configure a Rollup.
type RollupOptions struct {
	// Dir holds the rollup TSDB and its watermark (default: <raw dir>/rollup).
	Dir string
	// Retention drops rollups older than this (0: DefaultRollupRetention).
	Retention time.Duration
	// Delay is how long after its end a minute is rolled up (0:
	// DefaultRollupDelay).
	Delay time.Duration
	// Every is how often Run rolls up (0: DefaultRollupEvery).
	Every time.Duration
	// PassGCPercent lowers the Go GC's target (debug.SetGCPercent) to
	// this while a Step runs and merges its blocks (0: left alone; never
	// raised). A pass allocates in bursts (block writers, compaction);
	// at the server's +50 % each burst lets the heap grow by half the
	// live heap, which put the server above Prometheus' RSS at every
	// pass. +20 % for the minute a pass lasts halves that peak for about
	// a fifth more CPU in the pass (BenchmarkRollupPassMemory).
	PassGCPercent int
	Logger        *slog.Logger
}

// Rollup computes and serves the one-minute aggregates of a raw Store.
type Rollup struct {
	raw  *Store
	db   *tsdb.DB
	opts RollupOptions
	log  *slog.Logger

	batchSeries int // rollup series per block (rollupBatchSeries; tests lower it)

	mu sync.Mutex // serialises Step
	// watermark (ms): every bucket before it is rolled up. Atomic so
	// queries need not wait for a running pass.
	watermark                          atomic.Int64
	minutes, series, samples, rejected atomic.Uint64
	// walFailed: a commit failed and may have torn the WAL; no commit may
	// follow it before a restart cuts the torn tail (durable.go).
	walFailed atomic.Bool

	// mappedDir is the raw store's directory as /proc/self/maps names
	// it; pageOut is pageOutMapped (tests count the calls).
	mappedDir string
	pageOut   func(dir string) (int64, error)
	pagedOut  atomic.Int64
}

// RollupStats count the work of a Rollup since it was opened.
type RollupStats struct {
	Minutes, Series, Samples, Rejected uint64
	// PagedOut is the bytes of the raw store's file mappings handed back
	// to the kernel after passes (see pageOutMapped).
	PagedOut int64
}

// OpenRollup opens (or creates) the rollup database of raw and reads its
// watermark.
func OpenRollup(raw *Store, opts RollupOptions) (*Rollup, error) {
	if raw == nil {
		return nil, errors.New("store: rollup: no raw store")
	}
	if opts.Retention < 0 || opts.Delay < 0 || opts.Every < 0 {
		return nil, errors.New("store: rollup: negative retention, delay or period")
	}
	if opts.Dir == "" {
		opts.Dir = filepath.Join(raw.opts.Dir, "rollup")
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRollupRetention
	}
	if opts.Delay == 0 {
		opts.Delay = DefaultRollupDelay
	}
	if opts.Every == 0 {
		opts.Every = DefaultRollupEvery
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	wm, err := readWatermark(filepath.Join(opts.Dir, watermarkFile))
	if err != nil {
		return nil, err
	}
	to := tsdb.DefaultOptions()
	to.RetentionDuration = opts.Retention.Milliseconds()
	to.WALCompression = compression.Snappy
	// Passes write blocks (pass), never into the head. An out-of-order
	// window makes CompactOOOHead, which has nothing to compact, reload the
	// blocks: the one public way to make new blocks visible at once.
	to.OutOfOrderTimeWindow = (2 * rollupChunk).Milliseconds()
	if err := repairLogs(opts.Dir, opts.Logger); err != nil {
		return nil, err
	}
	// No appender writes the head, so nothing needs isolation.
	to.IsolationDisabled = true
	db, err := tsdb.Open(opts.Dir, opts.Logger, nil, to, nil)
	if err != nil {
		return nil, fmt.Errorf("store: open rollup %s: %w", opts.Dir, err)
	}
	r := &Rollup{raw: raw, db: db, opts: opts, log: opts.Logger, batchSeries: rollupBatchSeries, pageOut: pageOutMapped}
	r.mappedDir = raw.opts.Dir
	if abs, err := filepath.Abs(raw.opts.Dir); err == nil {
		r.mappedDir = abs
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			r.mappedDir = real
		}
	}
	r.watermark.Store(wm)
	return r, nil
}

// Close closes the rollup database (not the raw store).
func (r *Rollup) Close() error {
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("store: close rollup %s: %w", r.opts.Dir, err)
	}
	return nil
}

// Watermark is the end of the rolled-up time: every minute before it has
// its rollups.
func (r *Rollup) Watermark() time.Time {
	return time.UnixMilli(r.watermark.Load())
}

// Stats returns the counters.
func (r *Rollup) Stats() RollupStats {
	return RollupStats{Minutes: r.minutes.Load(), Series: r.series.Load(), Samples: r.samples.Load(), Rejected: r.rejected.Load(),
		PagedOut: r.pagedOut.Load()}
}

// Run rolls up every completed minute at start (catching up from the
// watermark) and then every RollupOptions.Every until ctx ends. Errors are logged and
// retried at the next minute, so a bad pass does not stop the server.
func (r *Rollup) Run(ctx context.Context) error {
	r.log.Info("rollups started", "dir", r.opts.Dir, "retention", r.opts.Retention.String(), "watermark", r.Watermark().UTC())
	for {
		if n, err := r.Step(ctx, time.Now()); err != nil {
			r.log.Warn("rollup failed", "err", err)
		} else if n > 0 {
			r.log.Debug("rolled up", "minutes", n, "watermark", r.Watermark())
		}
		// Wake Delay past the end of the next period.
		now := time.Now()
		next := now.Truncate(r.opts.Every).Add(r.opts.Delay % r.opts.Every)
		for !next.After(now) {
			next = next.Add(r.opts.Every)
		}
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Step rolls up every complete minute ending at least Delay before now
// that is not yet rolled up, and returns how many minutes it covered. The
// watermark is persisted after each committed pass. A rollup sample is a
// function of the raw minute alone, so repeating a pass rewrites identical
// samples: re-runs never count twice.
func (r *Rollup) Step(ctx context.Context, now time.Time) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.walFailed.Load() {
		return 0, errors.New("store: rollup: paused until restart after a failed write")
	}
	if err := r.raw.Writable(); err != nil {
		return 0, nil // same disk, most likely: wait, the minutes stay due
	}
	end := now.Add(-r.opts.Delay).Truncate(RollupStep).UnixMilli()
	start := r.watermark.Load()
	rs := r.raw.MinTime()
	if rs == math.MaxInt64 && start == 0 {
		return 0, nil // nothing ingested yet
	}
	if rs != math.MaxInt64 && rs > start {
		// Nothing older exists in raw (first run, or raw retention ran
		// ahead while rollups were off).
		start = time.UnixMilli(rs).Truncate(RollupStep).UnixMilli()
	}
	if start < end && r.opts.PassGCPercent > 0 {
		old := debug.SetGCPercent(r.opts.PassGCPercent)
		if old >= 0 && old < r.opts.PassGCPercent {
			debug.SetGCPercent(old) // already lower: keep it
		}
		defer debug.SetGCPercent(old)
	}
	if start < end {
		// Merge the passes' overlapping blocks now, while the GC target
		// is low, rather than at the database's next compaction (with
		// nothing to merge, Compact only plans). A stopping server
		// leaves it to the database's next start.
		defer func() {
			if ctx.Err() != nil {
				return
			}
			if err := r.db.Compact(ctx); err != nil {
				r.log.Warn("rollup: compacting the pass's blocks failed; the database retries", "err", err)
			}
		}()
	}
	step := RollupStep.Milliseconds()
	minutes := 0
	for from := start; from < end; {
		if err := ctx.Err(); err != nil {
			return minutes, err
		}
		to := min(from+rollupChunk.Milliseconds(), end)
		if err := r.pass(ctx, from, to); err != nil {
			return minutes, err
		}
		if err := writeWatermark(filepath.Join(r.opts.Dir, watermarkFile), to); err != nil {
			return minutes, err
		}
		r.watermark.Store(to)
		minutes += int((to - from) / step)
		r.minutes.Add(uint64((to - from) / step))
		from = to
	}
	return minutes, nil
}

// bucket accumulates one series' samples in one minute.
type bucket struct {
	min, max, sum float64
	n             int
	endsStale     bool // the last raw sample was a stale marker
}

// pass rolls up the minute-aligned range [from, to) of raw data. The
// rollups go through block writers, each holding at most rollupBatchSeries
// series, straight into blocks: appended to the rollup database's head,
// four series per raw series would stay in memory for hours at a cost of
// several hundred bytes each, more than the raw head itself.
func (r *Rollup) pass(ctx context.Context, from, to int64) error {
	q, err := r.raw.Querier(from, to-1) // values as stored are scaled (scale.go)
	if err != nil {
		return fmt.Errorf("store: rollup %s..%s: raw querier: %w", fmtMs(from), fmtMs(to), err)
	}
	defer q.Close()
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	step := RollupStep.Milliseconds()
	buckets := make([]bucket, (to-from)/step)
	w := &rollupWriter{r: r}
	defer w.close()
	var (
		it  chunkenc.Iterator
		lb  labels.Builder
		out [len(aggs)]labels.Labels
	)
	for set.Next() {
		s := set.At()
		clear(buckets)
		seen := false
		it = s.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			if vt != chunkenc.ValFloat {
				continue // histograms are not rolled up
			}
			t, v := it.At()
			i := (t - from) / step
			if t < from || i >= int64(len(buckets)) {
				continue
			}
			b := &buckets[i]
			seen = true
			if value.IsStaleNaN(v) {
				b.endsStale = true
				continue
			}
			if b.n == 0 || v < b.min {
				b.min = v
			}
			if b.n == 0 || v > b.max {
				b.max = v
			}
			b.sum += v
			b.n++
			b.endsStale = false
		}
		if err := it.Err(); err != nil {
			return fmt.Errorf("store: rollup: read %s: %w", s.Labels(), err)
		}
		if !seen {
			continue
		}
		lb.Reset(s.Labels())
		for k, a := range aggs {
			lb.Set(RollupLabel, a)
			out[k] = lb.Labels()
		}
		app, err := w.appender(ctx)
		if err != nil {
			return err
		}
		for i := range buckets {
			b := &buckets[i]
			t := from + int64(i)*step
			if b.n > 0 {
				vals := [len(aggs)]float64{b.min, b.max, b.sum / float64(b.n), float64(b.n)}
				for k := range aggs {
					if err := r.append(app, out[k], t, vals[k]); err != nil {
						return err
					}
				}
				w.pending += len(aggs)
			}
			if b.endsStale {
				// The series went stale in this minute: end the rollup
				// series just before the next bucket, so a gap stays a
				// gap instead of the mean being carried forward.
				for k := range aggs {
					if err := r.append(app, out[k], t+step-1, math.Float64frombits(value.StaleNaN)); err != nil {
						return err
					}
				}
				w.pending += len(aggs)
			}
		}
		r.series.Add(1)
		w.series += len(aggs)
		blocks := w.blocks
		if err := w.commitIfFull(ctx); err != nil {
			return fmt.Errorf("store: rollup %s..%s: %w", fmtMs(from), fmtMs(to), err)
		}
		if w.blocks != blocks {
			r.releaseMapped() // bound what a pass keeps resident
		}
	}
	if err := set.Err(); err != nil {
		return fmt.Errorf("store: rollup %s..%s: select raw series: %w", fmtMs(from), fmtMs(to), err)
	}
	if err := w.flush(ctx); err != nil {
		return fmt.Errorf("store: rollup %s..%s: %w", fmtMs(from), fmtMs(to), err)
	}
	r.releaseMapped()
	if w.blocks > 0 {
		// Load the new blocks now, so queries see them once the watermark
		// moves (see OpenRollup).
		if err := r.db.CompactOOOHead(ctx); err != nil {
			return fmt.Errorf("store: rollup %s..%s: load blocks: %w", fmtMs(from), fmtMs(to), err)
		}
	}
	return nil
}

// releaseMapped hands the pages of the raw store's mapped chunk files,
// which the pass has just read, back to the kernel. A failure costs only
// memory, so it is logged, not returned.
func (r *Rollup) releaseMapped() {
	n, err := r.pageOut(r.mappedDir)
	r.pagedOut.Add(n)
	if err != nil {
		r.log.Debug("rollup: releasing mapped pages failed", "err", err)
	}
}

// rollupWriter writes one pass's rollups as blocks into the rollup
// database's directory, rollupBatchSeries series a block.
type rollupWriter struct {
	r       *Rollup
	bw      *tsdb.BlockWriter
	app     storage.Appender
	series  int // series in bw
	pending int // samples in app
	blocks  int // blocks written
}

// rollupCommitEvery bounds the samples one appender buffers.
const rollupCommitEvery = 100_000

func (w *rollupWriter) appender(ctx context.Context) (storage.Appender, error) {
	if w.bw == nil {
		// Its own logs ("flushing") would repeat every pass.
		bw, err := tsdb.NewBlockWriter(slog.New(slog.DiscardHandler), w.r.opts.Dir, tsdb.DefaultBlockDuration)
		if err != nil {
			return nil, fmt.Errorf("store: rollup: block writer: %w", err)
		}
		w.bw = bw
	}
	if w.app == nil {
		w.app = w.bw.Appender(ctx)
	}
	return w.app, nil
}

// commitIfFull commits the buffered samples when there are many and
// writes the block when it holds rollupBatchSeries series.
func (w *rollupWriter) commitIfFull(ctx context.Context) error {
	if w.series >= w.r.batchSeries {
		return w.flush(ctx)
	}
	if w.pending >= rollupCommitEvery {
		return w.commit()
	}
	return nil
}

func (w *rollupWriter) commit() error {
	if w.app == nil {
		return nil
	}
	err := w.app.Commit()
	w.app = nil
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	w.r.samples.Add(uint64(w.pending))
	w.pending = 0
	return nil
}

// flush writes what the block writer holds as a block.
func (w *rollupWriter) flush(ctx context.Context) error {
	if err := w.commit(); err != nil {
		return err
	}
	if w.bw == nil {
		return nil
	}
	if w.series > 0 {
		if _, err := w.bw.Flush(ctx); err != nil {
			return fmt.Errorf("write block: %w", err)
		}
		w.blocks++
	}
	w.series = 0
	return w.close()
}

func (w *rollupWriter) close() error {
	if w.app != nil {
		_ = w.app.Rollback()
		w.app = nil
	}
	if w.bw == nil {
		return nil
	}
	err := w.bw.Close()
	w.bw = nil
	if err != nil {
		return fmt.Errorf("close block writer: %w", err)
	}
	return nil
}

func (r *Rollup) append(app storage.Appender, lset labels.Labels, t int64, v float64) error {
	_, err := app.Append(0, lset, t, v)
	switch {
	case err == nil:
		return nil
	case sampleRejected(err):
		// Already there from an interrupted pass, or below the rollup
		// database's retention: either way nothing to add.
		r.rejected.Add(1)
		return nil
	default:
		return fmt.Errorf("store: rollup: append %s: %w", lset, err)
	}
}

// MinTime is the oldest timestamp the raw store holds (math.MaxInt64 when
// it is empty).
func (s *Store) MinTime() int64 {
	if bs := s.tdb().Blocks(); len(bs) > 0 {
		return bs[0].Meta().MinTime
	}
	h := s.tdb().Head()
	if h.NumSeries() == 0 {
		return math.MaxInt64
	}
	return h.MinTime()
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// readWatermark returns the persisted watermark, 0 if there is none yet.
func readWatermark(path string) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read rollup watermark: %w", err)
	}
	defer f.Close()
	// 20 digits and a newline at most; don't read a huge stray file whole.
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, fmt.Errorf("store: read rollup watermark %s: %w", path, err)
	}
	return parseWatermark(path, b)
}

// parseWatermark parses the file's content: decimal Unix milliseconds,
// minute-aligned, and one newline.
func parseWatermark(path string, b []byte) (int64, error) {
	s := string(bytes.TrimSuffix(b, []byte("\n")))
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms < 0 || ms%RollupStep.Milliseconds() != 0 {
		return 0, fmt.Errorf("store: rollup watermark %s: want minute-aligned Unix milliseconds, got %q", path, truncate(s, 40))
	}
	return ms, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// writeWatermark replaces the file atomically (write, sync, rename), so a
// crash leaves the old or the new value, never a torn one.
func writeWatermark(path string, ms int64) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("store: write rollup watermark: %w", err)
	}
	_, err = f.WriteString(strconv.FormatInt(ms, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: write rollup watermark %s: %w", path, err)
	}
	return nil
}
