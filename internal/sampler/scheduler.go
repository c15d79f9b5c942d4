package sampler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Instance is a configured plugin ready to run.
type Instance struct {
	Name     string
	Plugin   Plugin
	Interval time.Duration
	Offset   time.Duration
}

// PluginStats is the per-plugin accounting kept by the scheduler.
type PluginStats struct {
	Name      string
	Errors    atomic.Uint64
	Samples   atomic.Uint64 // values appended by the last tick
	LastNanos atomic.Int64  // duration of the last Sample call
	LastFail  atomic.Bool   // the last Sample call failed ("not available" is no failure)
	lastErr   string        // guarded by the group goroutine
}

// Stats is the scheduler's accounting, shared with the self plugin.
type Stats struct {
	Plugins  []*PluginStats
	Ticks    atomic.Uint64
	Overruns atomic.Uint64
}

// Plugin returns the stats of the named plugin, creating none.
func (s *Stats) Plugin(name string) *PluginStats {
	for _, p := range s.Plugins {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Sink is called once per group, with the group's index (0, 1, … in the
// order of Groups), when the scheduler is built; the function it returns
// (nil: none) receives each of that group's ticks synchronously on the
// group's goroutine and must not keep b after returning. Each group thus
// has its own destination (an upstream stream) and no one has to guess a
// batch's group from its series.
type Sink func(group int) func(b *metric.Batch)

// Scheduler runs plugin groups, one goroutine per distinct (interval,
// offset), ticking on wall-clock multiples of the interval plus the offset.
type Scheduler struct {
	groups []*group
	stats  *Stats
	log    *slog.Logger
	// kernelTimer: wait for ticks on a kernel timer (UseKernelTimer).
	kernelTimer bool
}

type member struct {
	inst  Instance
	stats *PluginStats
}

type group struct {
	interval, offset time.Duration
	members          []member
	sink             func(b *metric.Batch)
	cur              metric.Batch
	mu               sync.RWMutex
	pub              metric.Batch
}

// NewScheduler groups instances by interval and offset. stats must be the
// Stats handed to the plugins' Init (it may be nil for a new one).
func NewScheduler(insts []Instance, stats *Stats, log *slog.Logger, sink Sink) (*Scheduler, error) {
	if stats == nil {
		stats = &Stats{}
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Scheduler{stats: stats, log: log}
	for _, in := range insts {
		if in.Interval <= 0 {
			return nil, fmt.Errorf("plugin %s: interval must be positive", in.Name)
		}
		ps := stats.Plugin(in.Name)
		if ps == nil {
			ps = &PluginStats{Name: in.Name}
			stats.Plugins = append(stats.Plugins, ps)
		}
		var g *group
		for _, cand := range s.groups {
			if cand.interval == in.Interval && cand.offset == in.Offset%in.Interval {
				g = cand
			}
		}
		if g == nil {
			g = &group{interval: in.Interval, offset: in.Offset % in.Interval}
			s.groups = append(s.groups, g)
		}
		g.members = append(g.members, member{inst: in, stats: ps})
	}
	if sink != nil {
		for i, g := range s.groups {
			g.sink = sink(i)
		}
	}
	return s, nil
}

// Groups is the number of groups; their indexes are those Sink is given.
func (s *Scheduler) Groups() int { return len(s.groups) }

// Stats returns the scheduler's accounting.
func (s *Scheduler) Stats() *Stats { return s.stats }

// NextTick returns the first instant after now that is a multiple of
// interval (counted from the Unix epoch) plus offset.
func NextTick(now time.Time, interval, offset time.Duration) time.Time {
	iv := int64(interval)
	n := now.UnixNano() - int64(offset)
	k := n / iv
	if n < 0 && n%iv != 0 {
		k--
	}
	return time.Unix(0, (k+1)*iv+int64(offset))
}

// Run ticks every group until ctx is done.
func (s *Scheduler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, g := range s.groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runGroup(ctx, g)
		}()
	}
	wg.Wait()
	return nil
}

// UseKernelTimer makes Run wait for ticks on a kernel timer (timerfd) where
// the platform has one, instead of a Go timer: fewer thread wake-ups per
// tick (see kernelTimer). Tests on the fake clock of testing/synctest keep
// the Go timer. Call it before Run.
func (s *Scheduler) UseKernelTimer() { s.kernelTimer = true }

func (s *Scheduler) runGroup(ctx context.Context, g *group) {
	var w waiter = newGoTimer()
	if s.kernelTimer {
		w = newWaiter(ctx)
	}
	defer func() { _ = w.close() }()
	next := NextTick(time.Now(), g.interval, g.offset)
	for {
		if err := w.wait(ctx, next); err != nil {
			if ctx.Err() != nil {
				return
			}
			// Only the kernel timer can fail; the Go timer cannot.
			s.log.Warn("tick timer failed; going on with a Go timer", "err", err)
			_ = w.close()
			w = newGoTimer()
			continue
		}
		if now := time.Now(); now.Before(next) {
			// Woken before the tick: the wall clock was set back.
			next = NextTick(now, g.interval, g.offset)
			continue
		}
		s.tick(ctx, g, next)
		// Recompute from the wall clock so there is no drift; ticks that
		// already passed while we worked are skipped and counted, never queued.
		after := NextTick(time.Now(), g.interval, g.offset)
		if missed := int64(after.Sub(next)/g.interval) - 1; missed > 0 {
			s.stats.Overruns.Add(uint64(missed))
		}
		next = after
	}
}

// tick samples every member of g into its batch, hands it to the sink and
// publishes it for readers.
func (s *Scheduler) tick(ctx context.Context, g *group, now time.Time) {
	g.cur.Reset(now)
	for i := range g.members {
		s.sampleOne(ctx, &g.members[i], now, &g.cur)
	}
	s.stats.Ticks.Add(1)
	if g.sink != nil {
		g.sink(&g.cur)
	}
	g.mu.Lock()
	g.cur, g.pub = g.pub, g.cur
	g.mu.Unlock()
}

func (s *Scheduler) sampleOne(ctx context.Context, m *member, now time.Time, b *metric.Batch) {
	start := time.Now()
	before := b.Len()
	err := safeSample(ctx, m.inst.Plugin, now, b)
	m.stats.LastNanos.Store(int64(time.Since(start)))
	m.stats.Samples.Store(uint64(b.Len() - before))
	m.stats.LastFail.Store(err != nil && !errors.Is(err, ErrNotAvailable))
	if err == nil {
		m.stats.lastErr = ""
		return
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return // cut short by shutdown: not the plugin's failure
	}
	if errors.Is(err, ErrNotAvailable) {
		// Guarded: building the arguments allocates, every tick of a
		// plugin waiting for its hardware (a driver loaded later).
		if s.log.Enabled(ctx, slog.LevelDebug) {
			s.log.Debug("plugin has nothing to sample", "plugin", m.inst.Name, "err", err)
		}
		return
	}
	m.stats.Errors.Add(1)
	// Log a failure once, not every tick: again only when it changes.
	if msg := err.Error(); msg != m.stats.lastErr {
		m.stats.lastErr = msg
		s.log.Warn("plugin sample failed", "plugin", m.inst.Name, "err", err)
	}
}

// safeSample turns a plugin panic into an error so the tick goes on.
func safeSample(ctx context.Context, p Plugin, now time.Time, b *metric.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return p.Sample(ctx, now, b)
}

// CollectOnce samples every plugin once, in order, into b (for
// `vigil sample --once` and tests).
func (s *Scheduler) CollectOnce(ctx context.Context, now time.Time, b *metric.Batch) {
	b.Reset(now)
	for _, g := range s.groups {
		for i := range g.members {
			s.sampleOne(ctx, &g.members[i], now, b)
		}
	}
}

// View calls fn with the latest published batch of every group, holding
// read locks so the batches stay valid during fn.
func (s *Scheduler) View(fn func(batches []*metric.Batch)) {
	bs := make([]*metric.Batch, 0, len(s.groups))
	for _, g := range s.groups {
		g.mu.RLock()
		bs = append(bs, &g.pub)
	}
	defer func() {
		for _, g := range s.groups {
			g.mu.RUnlock()
		}
	}()
	fn(bs)
}

// Close releases what plugins hold (open files, worker goroutines) for
// those that implement io.Closer. Call it after Run has returned.
func (s *Scheduler) Close() error {
	var errs []error
	for _, g := range s.groups {
		for _, m := range g.members {
			if c, ok := m.inst.Plugin.(io.Closer); ok {
				if err := c.Close(); err != nil {
					errs = append(errs, fmt.Errorf("close plugin %s: %w", m.inst.Name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}
