// Package treestate is the tree's shared view of its nodes: which are up
// (Liveness, with each node's usual delay and so its clock offset) and
// which are expected (host lists). Aggregators and the server's ingest
// both keep one; it imports no other Vigil package.
package treestate

import (
	"math"
	"sync"
	"time"
)

// Liveness tracks which nodes are sending. A node is up from its first tick
// and down once it has been silent for DownAfter; nodes named in the
// expected set but never seen count as down. It is kept by
// each aggregator and by the server's ingest, which both mark nodes up and
// down.
type Liveness struct {
	DownAfter time.Duration

	mu       sync.Mutex
	nodes    map[string]*nodeState
	expected map[string]bool
	// list holds the known nodes densely and last, at the same index,
	// each one's latest sign of life (its last tick or lower tier's
	// report, as time since base): Sweep scans that array and looks at a
	// node only once it has been silent for DownAfter, instead of chasing
	// every node's pointer twice a second.
	list []*nodeState
	last []int64
	base time.Time
	// nup counts the nodes up; expectedKnown the expected ones in nodes.
	nup, expectedKnown int
	// Ticks since the last Behind call, and how many of them arrived
	// later than their node's usual delay by more than DownAfter/2.
	ticks, late int
}

// lagWindow is how long a node's smallest delay (tick timestamp to
// arrival) is remembered as its usual delay, which is mostly its clock's
// offset: a clock an hour slow makes every tick an hour "late" without
// anything being behind.
const lagWindow = time.Minute

type nodeState struct {
	// What every tick updates first (seen), for fewer cache lines.
	idx int // in Liveness.list; -1 once forgotten
	up  bool
	// Smallest delay of the current and the previous lagWindow.
	minLag, prevMinLag time.Duration
	lastSeen           time.Time // wall clock of the last tick received
	lastTick           time.Time // timestamp of that tick
	window             time.Time // start of the current lagWindow

	name  string
	since time.Time // last change of up
	// reported: wall clock of the last time a lower tier reported this
	// node down without it ever ticking here (ReportedDown).
	reported time.Time
}

// usualLag is the node's smallest recent delay; minus it is the estimate
// of the node's clock offset.
func (n *nodeState) usualLag() time.Duration { return min(n.minLag, n.prevMinLag) }

// NodeStatus is a snapshot of one node.
type NodeStatus struct {
	Node     string    `json:"node"`
	Up       bool      `json:"up"`
	LastSeen time.Time `json:"last_seen"`
	LastTick time.Time `json:"last_tick"`
	Since    time.Time `json:"since"`
	Expected bool      `json:"expected"`
	// ClockOffset estimates how far the node's clock is ahead of this
	// host's (negative: behind): minus its smallest recent delay from
	// tick timestamp to arrival.
	ClockOffset time.Duration `json:"clock_offset_ns"`
}

// NewLiveness marks a node down after downAfter of silence.
func NewLiveness(downAfter time.Duration) *Liveness {
	return &Liveness{DownAfter: downAfter, nodes: map[string]*nodeState{}, expected: map[string]bool{}, base: time.Now()}
}

// NodeRef names a node to Liveness without a lookup by name: what a
// receiver keeps per stream, for SeenRef.
type NodeRef struct {
	name string
	n    *nodeState // under Liveness.mu; found again once forgotten
}

// Ref returns a reference to node for SeenRef, to keep by value where
// the caller keeps its own state of the node's stream.
func (l *Liveness) Ref(node string) NodeRef { return NodeRef{name: node} }

// Seen records a tick of node at wall time now; it returns true when the
// node was not up before (it joined or came back).
func (l *Liveness) Seen(node string, tick, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen(l.get(node), tick, now)
}

// SeenRef is Seen for the node r names, without the lookup by name.
func (l *Liveness) SeenRef(r *NodeRef, tick, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.n == nil || r.n.idx < 0 {
		r.n = l.get(r.name)
	}
	return l.seen(r.n, tick, now)
}

// get returns node's state, adding it if it is not known; l.mu is held.
func (l *Liveness) get(node string) *nodeState {
	if n := l.nodes[node]; n != nil {
		return n
	}
	n := &nodeState{name: node, idx: len(l.list)}
	l.nodes[node] = n
	l.list = append(l.list, n)
	l.last = append(l.last, math.MinInt64/2) // never: silent for ages, no overflow
	if l.expected[node] {
		l.expectedKnown++
	}
	return n
}

// heard notes a sign of life of n at t; l.mu is held.
func (l *Liveness) heard(n *nodeState, t time.Time) {
	l.last[n.idx] = max(l.last[n.idx], int64(t.Sub(l.base)))
}

// forget drops the node at index i of l.list; l.mu is held.
func (l *Liveness) forget(i int) {
	n := l.list[i]
	end := len(l.list) - 1
	l.list[i], l.last[i] = l.list[end], l.last[end]
	l.list[i].idx = i
	l.list[end] = nil
	l.list, l.last = l.list[:end], l.last[:end]
	n.idx = -1
	delete(l.nodes, n.name)
}

func (l *Liveness) seen(n *nodeState, tick, now time.Time) bool {
	lag := now.Sub(tick)
	if n.lastSeen.IsZero() { // first tick (the node may be known from a report)
		n.minLag, n.prevMinLag, n.window = lag, lag, now
	}
	switch {
	case now.Sub(n.window) >= lagWindow:
		n.prevMinLag, n.minLag, n.window = n.minLag, lag, now
	case lag < n.minLag:
		n.minLag = lag
	}
	l.ticks++
	if lag-n.usualLag() > l.DownAfter/2 {
		l.late++
	}
	n.lastSeen = now
	l.heard(n, now)
	if tick.After(n.lastTick) {
		n.lastTick = tick
	}
	if !n.up {
		n.up = true
		l.nup++
		n.since = now
		return true
	}
	return false
}

// Behind tells whether most ticks since the last call arrived later than
// usual for their node: then the receiver itself is behind (it cannot
// keep up, or its upstream connection stalled), and silence says nothing
// about the nodes. Lateness is judged against each node's own usual delay,
// so a node whose clock is wrong never stops down detection for the others.
func (l *Liveness) Behind() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	behind := l.late*2 > l.ticks
	l.ticks, l.late = 0, 0
	return behind
}

// SetExpected replaces the set of nodes the configuration lists; listed
// nodes never seen are reported down, unlisted ones that send are still
// accepted (nodes join by themselves).
func (l *Liveness) SetExpected(nodes []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expected = make(map[string]bool, len(nodes))
	l.expectedKnown = 0
	for _, n := range nodes {
		if !l.expected[n] && l.nodes[n] != nil {
			l.expectedKnown++
		}
		l.expected[n] = true
	}
}

// Sweep marks nodes silent for DownAfter as down and returns them. Nodes
// that are down, not expected and silent for 10× DownAfter are forgotten,
// so a cluster whose nodes come and go does not grow without bound.
func (l *Liveness) Sweep(now time.Time) (down []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := int64(now.Sub(l.base))
	for i := 0; i < len(l.list); i++ {
		// Silent since its last tick or, if later, lower tier's report.
		silent := time.Duration(at - l.last[i])
		if silent < l.DownAfter {
			continue
		}
		n := l.list[i]
		if n.up && silent >= l.DownAfter {
			n.up = false
			l.nup--
			n.since = now
			down = append(down, n.name)
		}
		if !n.up && !l.expected[n.name] && silent >= 10*l.DownAfter {
			l.forget(i)
			i-- // the last node moved here
		}
	}
	return down
}

// ReportedDown records that a lower tier reports node down at wall time
// now. A node never heard of is kept as down (a child expected there that
// never connected) until the reports stop for 10× DownAfter, so the lower
// tier must repeat them (ExpectedDown); a node up here is left as it is,
// its own ticks or silence decide. It returns true when the node was down
// here already (a repeated report: nothing new to write).
func (l *Liveness) ReportedDown(node string, now time.Time) (wasDown bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.nodes[node]
	if n == nil {
		n = l.get(node)
		n.since = now
		wasDown = false
	} else {
		wasDown = !n.up
	}
	if !n.up {
		n.reported = now
		l.heard(n, now)
	}
	return wasDown
}

// ExpectedDown lists the expected nodes that are down here, never seen
// ones included: what a tier reports upstream again and again, so the
// tiers above keep them down however long they stay away.
func (l *Liveness) ExpectedDown() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name := range l.expected {
		if n := l.nodes[name]; n == nil || !n.up {
			out = append(out, name)
		}
	}
	return out
}

// Counts returns how many nodes are up and down (expected nodes never seen
// count as down).
func (l *Liveness) Counts() (up, down int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nup, len(l.nodes) - l.nup + len(l.expected) - l.expectedKnown
}

// Snapshot lists every known and expected node.
func (l *Liveness) Snapshot() []NodeStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]NodeStatus, 0, len(l.nodes)+len(l.expected))
	for name, n := range l.nodes {
		out = append(out, NodeStatus{Node: name, Up: n.up, LastSeen: n.lastSeen, LastTick: n.lastTick, Since: n.since, Expected: l.expected[name],
			ClockOffset: -n.usualLag()})
	}
	for name := range l.expected {
		if _, seen := l.nodes[name]; !seen {
			out = append(out, NodeStatus{Node: name, Expected: true})
		}
	}
	return out
}

// LastTick returns the timestamp of the newest tick of node, and false
// when the node has never sent one. It costs one map lookup, so marking
// each of thousands of nodes down at once stays linear.
func (l *Liveness) LastTick(node string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.nodes[node]
	if n == nil || n.lastTick.IsZero() {
		return time.Time{}, false
	}
	return n.lastTick, true
}

// Up tells whether node is up here (one map lookup).
func (l *Liveness) Up(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.nodes[node]
	return n != nil && n.up
}

// Down lists nodes currently down, including expected ones never seen.
func (l *Liveness) Down() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name, n := range l.nodes {
		if !n.up {
			out = append(out, name)
		}
	}
	for name := range l.expected {
		if _, seen := l.nodes[name]; !seen {
			out = append(out, name)
		}
	}
	return out
}
