// Package ingest turns the tree's wire streams into store appends: every
// tick of a node is stored with up{node}=1, nodes that fall silent (or that
// an aggregator reports down) get up=0 and their series are marked stale
// so dashboards show missing data, not frozen or zero values.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/treestate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Store is what ingest needs of the time-series store.
type Store interface {
	// AppendTick stores one tick; up: with up{node}=1 in the same commit.
	AppendTick(node string, t time.Time, descs []*metric.Desc, values []float64, up bool) error
	SetUp(node string, t time.Time, up bool) error
	Gap(node string, from, to time.Time) error
}

// Tap watches the decoded streams.
type Tap interface {
	Schema(node string, descs []*metric.Desc)
	// Tick returns the jobs this tick reports ended on node (their
	// vigil_job_running is 0): their series get stale markers at the
	// node's next tick, when they are gone.
	Tick(node string, t time.Time, descs []*metric.Desc, values []float64) (ended []string)
}

// retirer is the store's Retire (internal/store/retire.go); a store
// without it keeps ended jobs' series for the lookback, as before.
type retirer interface {
	Retire(node string, t time.Time, label, val string) (int, error)
}

// Stats counts what ingest did.
type Stats struct {
	Ticks     atomic.Uint64
	Values    atomic.Uint64
	Errors    atomic.Uint64 // appends that failed or had rejected samples
	Gaps      atomic.Uint64
	NodesDown atomic.Uint64 // transitions to down
}

// Handler implements wire.Handler over a Store.
type Handler struct {
	wire.NopHandler
	store    Store
	log      *slog.Logger
	live     *treestate.Liveness
	interval time.Duration
	stats    Stats

	clocks clocks // per-node clock offsets and skew (skew.go)

	mu      sync.Mutex
	lastErr string

	// A store that cannot write for now (disk full) holds the frame being
	// handled until it can (hold.go).
	holding  atomic.Int32  // ticks and gaps waiting for the store
	unkept   atomic.Uint64 // frames given up on: not acknowledged
	stop     chan struct{} // closed when Run ends: give up holding
	stopOnce sync.Once
	maxHold  time.Duration
	expected []string // Options.Expected, set in the liveness table by Run
	// ended holds, per node, the jobs its last tick reported ended.
	endedMu sync.Mutex
	ended   map[string][]string
	tap     Tap // Options.Tap, or nil
	nodeEvents
}

// New returns a handler; interval is the nodes' sampling interval (a node
// silent for 3 of them is down).
func New(st Store, interval time.Duration, log *slog.Logger) *Handler {
	return NewWithOptions(st, Options{Interval: interval, Logger: log})
}

// NewWithOptions returns a handler; see Options.
func NewWithOptions(st Store, o Options) *Handler {
	interval, log := o.Interval, o.Logger
	if interval <= 0 {
		interval = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{
		store: st, log: log.With("component", "ingest"), interval: interval,
		live: treestate.NewLiveness(3 * interval),
		stop: make(chan struct{}), maxHold: DefaultMaxHold, expected: o.Expected, ended: map[string][]string{}, tap: o.Tap,
	}
	h.nodeEvents.init(o.Events)
	h.initClocks(o)
	return h
}

// Stats returns the counters.
func (h *Handler) Stats() *Stats { return &h.stats }

// Liveness exposes the nodes' up/down state.
func (h *Handler) Liveness() *treestate.Liveness { return h.live }

func (h *Handler) fail(what string, err error) {
	h.stats.Errors.Add(1)
	if temporary(err) {
		return // the store logs its read-only state once
	}
	msg := err.Error()
	h.mu.Lock()
	defer h.mu.Unlock()
	if msg != h.lastErr { // log each new kind of failure once
		h.lastErr = msg
		h.log.Warn(what, "err", err)
	}
}

// Tick implements wire.Handler: store the tick with up=1.
func (h *Handler) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) {
	if h.live.Seen(node, t, time.Now()) {
		h.nodeUp(node, t)
	}
	if h.tap != nil {
		h.retireEnded(node, t)
	}
	err := h.hold(func() error { return h.store.AppendTick(node, t, descs, values, true) })
	h.stats.Ticks.Add(1)
	h.stats.Values.Add(uint64(len(values)))
	if h.tap != nil {
		if ended := h.tap.Tick(node, t, descs, values); len(ended) > 0 {
			h.endedMu.Lock()
			h.ended[node] = append(h.ended[node], ended...)
			h.endedMu.Unlock()
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrTooFarInFuture):
		h.stats.Errors.Add(1) // judgeClocks warns once per node
	default:
		h.fail("store append failed", err)
	}
}

// retireEnded ends the series of the jobs node reported ended on its
// previous tick, at this tick's time (the first without them).
func (h *Handler) retireEnded(node string, t time.Time) {
	h.endedMu.Lock()
	ids := h.ended[node]
	if ids != nil {
		delete(h.ended, node)
	}
	h.endedMu.Unlock()
	r, ok := h.store.(retirer)
	if !ok {
		return
	}
	for _, id := range ids {
		if _, err := r.Retire(node, t, "jobid", id); err != nil && !errors.Is(err, store.ErrTooFarInFuture) {
			h.fail("stale markers for an ended job failed", err)
		}
	}
}

// Schema implements wire.Handler: the tap learns the stream changed.
func (h *Handler) Schema(node string, descs []*metric.Desc) {
	h.schema(node, descs)
	if h.tap != nil {
		h.tap.Schema(node, descs)
	}
}

// Gap implements wire.Handler: lost ticks show as missing data.
func (h *Handler) Gap(node string, from, to time.Time) {
	h.stats.Gaps.Add(1)
	h.gap(node, from, to)
	if err := h.hold(func() error { return h.store.Gap(node, from, to) }); err != nil && !errors.Is(err, store.ErrTooFarInFuture) { // a clock-skew node: judgeClocks reports it
		h.fail("store gap failed", err)
	}
}

// NodeState implements wire.Handler: an aggregator reports a child down,
// also one that never connected (it repeats those reports, and Run
// writes up=0 for them meanwhile).
func (h *Handler) NodeState(node string, up bool, t time.Time) {
	if up {
		return // the node's next tick writes up=1
	}
	if h.live.ReportedDown(node, time.Now()) {
		return // down here already
	}
	if !h.live.Up(node) { // a node still ticking here goes down by its silence
		h.nodeDown(node, t, "reported down by its aggregator")
	}
	h.markDown(node, t, h.hold)
}

// markDown writes up=0 and stale markers through store: h.hold for a
// frame (kept or not acknowledged), a plain call for the sweeper.
func (h *Handler) markDown(node string, t time.Time, store func(func() error) error) {
	h.stats.NodesDown.Add(1)
	if err := store(func() error { return h.store.SetUp(node, t, false) }); err != nil {
		h.fail("store up=0 failed", err)
	}
	// Stale-mark the node's series from just after its last sample.
	last, ok := h.live.LastTick(node)
	if !ok {
		last = t.Add(-3 * h.interval)
	}
	if from := last.Add(time.Millisecond); t.After(from) {
		if err := store(func() error { return h.store.Gap(node, from, t) }); err != nil && !errors.Is(err, context.Canceled) {
			h.fail("store gap failed", err)
		}
	}
}

// Run marks silent nodes down and keeps writing up=0 for down nodes every
// interval, so `up == 0` stays queryable while a node is away.
func (h *Handler) Run(ctx context.Context) {
	defer h.stopOnce.Do(func() { close(h.stop) })
	t := time.NewTicker(h.interval)
	defer t.Stop()
	// Expected nodes get the same grace as a restart gives the others:
	// they are down once they had DownAfter to connect.
	expectAt := time.Now().Add(h.live.DownAfter)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if h.expected != nil && !now.Before(expectAt) {
				h.live.SetExpected(h.expected)
				h.expected = nil
			}
			h.judgeClocks(now)
			// While ingest itself is behind, silence says nothing about
			// the nodes; judge them once it has caught up. Lateness is
			// judged per node, so one wrong clock never stops this.
			if h.live.Behind() {
				h.log.Debug("ingest behind; not marking nodes down")
				continue
			}
			if h.holding.Load() > 0 { // the store holds the nodes up, not their silence
				continue
			}
			newlyDown := map[string]bool{}
			for _, n := range h.live.Sweep(now) {
				h.log.Info("node down", "node", n)
				newlyDown[n] = true
				h.nodeDown(n, now, fmt.Sprintf("silent for %s", h.live.DownAfter))
				h.markDown(n, now, func(f func() error) error { return f() })
			}
			for _, n := range h.live.Down() {
				if !newlyDown[n] {
					// Expected nodes that never connected are down from
					// the start: told once, like the others.
					h.nodeDown(n, now, "expected, not connected")
					if err := h.store.SetUp(n, now, false); err != nil {
						h.fail("store up=0 failed", err)
					}
				}
			}
		}
	}
}

// Taps lets several taps watch the streams; the ended jobs are the union.
type Taps []Tap

// Schema implements Tap.
func (ts Taps) Schema(node string, descs []*metric.Desc) {
	for _, t := range ts {
		t.Schema(node, descs)
	}
}

// Tick implements Tap.
func (ts Taps) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) (ended []string) {
	for _, tp := range ts {
		ended = append(ended, tp.Tick(node, t, descs, values)...)
	}
	return ended
}
