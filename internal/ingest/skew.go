package ingest

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/events"
)

// DefaultMaxClockOffset is how far a node's clock may be off the server's
// before the node is flagged: the store's default future limit, beyond
// which its ticks are refused.
const DefaultMaxClockOffset = 10 * time.Minute

// Stored per node once per interval, at the server's time.
const (
	offsetMetric = "vigil_node_clock_offset_seconds"
	skewMetric   = "vigil_node_clock_skew"
)

// Options configure a Handler.
type Options struct {
	// Interval is the nodes' sampling interval; a node silent for 3 of
	// them is down (0: 1s).
	Interval time.Duration
	// MaxClockOffset puts a node whose clock is further ahead or behind
	// the server's in the clock-skew state (0: DefaultMaxClockOffset).
	MaxClockOffset time.Duration
	// Offsets, if set, gets every live node's clock offset and skew state
	// (1 or 0) once per interval, so the API and dashboard can read them.
	Offsets OffsetStore
	// Registerer gets vigil_node_clock_offset_seconds{node} and
	// vigil_ingest_clock_skew_nodes (nil: not registered).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Expected lists the nodes that should be sending (the server's
	// topology); those that have not connected 3 intervals after Run
	// starts are down (up=0) until they do.
	Expected []string
	// Tap, if set, sees every stream's schema and ticks (package jobs
	// learns which jobs run where); it must be cheap.
	Tap Tap
	// Events gets node_down, node_up and gap events (nil: none).
	Events events.Sink
}

// OffsetStore stores a value per node at t in one commit (store.Store).
type OffsetStore interface {
	AppendNodeGauge(name string, t time.Time, nodes []string, values []float64) error
}

// clocks is the handler's view of the nodes' clocks. The offsets come
// from the liveness table (each node's smallest recent delay), so a node
// replaying buffered ticks is not mistaken for a wrong clock.
type clocks struct {
	max     time.Duration
	offsets OffsetStore

	mu     sync.Mutex
	last   []nodeClock     // of the last judgement, for /metrics
	skewed map[string]bool // nodes in skew, to log each change once
}

type nodeClock struct {
	node   string
	offset time.Duration
	skew   bool
}

func (h *Handler) initClocks(o Options) {
	h.clocks = clocks{max: o.MaxClockOffset, offsets: o.Offsets, skewed: map[string]bool{}}
	if h.clocks.max <= 0 {
		h.clocks.max = DefaultMaxClockOffset
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(clockCollector{&h.clocks})
	}
}

// ClockSkew lists the nodes whose clocks were off by more than the limit
// at the last judgement, with their offsets.
func (h *Handler) ClockSkew() map[string]time.Duration {
	c := &h.clocks
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]time.Duration{}
	for _, n := range c.last {
		if n.skew {
			out[n.node] = n.offset
		}
	}
	return out
}

// judgeClocks flags the live nodes whose clocks are off, logs each change
// and stores the offsets. It runs every interval, before the liveness
// sweep, and never holds it up.
func (h *Handler) judgeClocks(now time.Time) {
	c := &h.clocks
	snap := h.live.Snapshot()
	cur := make([]nodeClock, 0, len(snap))
	for _, s := range snap {
		if !s.Up {
			continue
		}
		cur = append(cur, nodeClock{node: s.Node, offset: s.ClockOffset, skew: s.ClockOffset > c.max || s.ClockOffset < -c.max})
	}
	c.mu.Lock()
	skewed := make(map[string]bool, len(c.skewed))
	for _, n := range cur {
		switch {
		case n.skew && !c.skewed[n.node]:
			h.log.Warn("node clock skew: its ticks are refused or misplaced until its clock is fixed",
				"node", n.node, "offset", n.offset.Round(time.Millisecond), "limit", c.max)
		case !n.skew && c.skewed[n.node]:
			h.log.Info("node clock back within bounds", "node", n.node, "offset", n.offset.Round(time.Millisecond))
		}
		if n.skew {
			skewed[n.node] = true
		}
	}
	c.skewed, c.last = skewed, cur
	c.mu.Unlock()
	if c.offsets == nil || len(cur) == 0 {
		return
	}
	nodes := make([]string, len(cur))
	offs := make([]float64, len(cur))
	flags := make([]float64, len(cur))
	for i, n := range cur {
		nodes[i], offs[i] = n.node, n.offset.Seconds()
		if n.skew {
			flags[i] = 1
		}
	}
	if err := c.offsets.AppendNodeGauge(offsetMetric, now, nodes, offs); err != nil {
		h.fail("store clock offsets failed", err)
	}
	if err := c.offsets.AppendNodeGauge(skewMetric, now, nodes, flags); err != nil {
		h.fail("store clock skew failed", err)
	}
}

var (
	offsetDesc = prometheus.NewDesc(offsetMetric,
		"How far the node's clock is ahead of the server's (negative: behind), from its smallest recent delay of tick timestamp to arrival.",
		[]string{"node"}, nil)
	skewNodesDesc = prometheus.NewDesc("vigil_ingest_clock_skew_nodes",
		"Live nodes whose clock is off by more than the limit (their ticks are refused or misplaced).", nil, nil)
)

// clockCollector exports the last judgement; its series are the live
// nodes, so they come and go with the liveness table.
type clockCollector struct{ c *clocks }

func (cc clockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- offsetDesc
	ch <- skewNodesDesc
}

func (cc clockCollector) Collect(ch chan<- prometheus.Metric) {
	cc.c.mu.Lock()
	defer cc.c.mu.Unlock()
	for _, n := range cc.c.last {
		ch <- prometheus.MustNewConstMetric(offsetDesc, prometheus.GaugeValue, n.offset.Seconds(), n.node)
	}
	ch <- prometheus.MustNewConstMetric(skewNodesDesc, prometheus.GaugeValue, float64(len(cc.c.skewed)))
}
