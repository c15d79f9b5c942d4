// Package drain is the server's side of the nodes' health checks: an
// ingest tap follows each node's vigil_health_check_ok and the reason of
// its vigil_health_check_failure, emits an event on each change of state,
// keeps the failing checks for the API (GET /api/v1/health) and, when
// asked (--drain-on-health), drains a failing node in Slurm and resumes it
// once every check passes again, only if Vigil drained it (docs/drain.md).
package drain

import (
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// Names of the health plugin's series (the contract of issue 15).
const (
	okMetric      = "vigil_health_check_ok"
	failureMetric = "vigil_health_check_failure"
)

// Bounds on what the nodes may make the tap keep.
const (
	maxStreamsPerNode = 16
	maxChecksPerNode  = 256
	maxCheckName      = 128
	maxReason         = 200
	// A check a node stops reporting while it goes on reporting others
	// is dropped (as passing) after this long: it was taken out of the
	// node's configuration.
	checkGone = 5 * time.Minute
	// A node that ticks without any health series this long (its health
	// plugin was removed) has its failing checks dropped, as passing.
	healthGone = time.Hour
)

// Check is one failing check of a node.
type Check struct {
	Check  string    `json:"check"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// checkState is what the tap knows of one check of a node.
type checkState struct {
	name    string
	failing bool
	reason  string
	since   time.Time // sample time it started failing
	seen    time.Time // sample time of its last value
}

// node is the tap's state of one node; mu guards it.
type node struct {
	mu      sync.Mutex
	streams []stream
	checks  []checkState
	health  time.Time // sample time of the last tick with health series
	last    time.Time // sample time of the last tick
	from    time.Time // sample time of the first tick, or when restored
}

// stream caches where one stream's health series are, found once per
// schema: a tick then only compares values.
type stream struct {
	first *metric.Desc
	n     int
	refs  []ref
}

// ref is one health series of a stream: its position in the tick, its
// check's index in node.checks, and for a failure series its reason.
type ref struct {
	pos     int32
	check   int32
	failure bool
	desc    *metric.Desc
	reason  string
}

// change is a check's transition, turned into an event outside the lock.
type change struct {
	check, reason string
	failing       bool
	t             time.Time
}

// Schema implements ingest's tap: a stream of node changed its series, so
// the cached positions of its health series are stale.
func (m *Manager) Schema(node string, _ []*metric.Desc) {
	m.mu.RLock()
	n := m.nodes[node]
	m.mu.RUnlock()
	if n == nil {
		return
	}
	n.mu.Lock()
	n.streams = n.streams[:0]
	n.mu.Unlock()
}

// Tick implements ingest's tap. A stream's health series are found from a
// per-stream cache (a scan only after a schema change); a tick without
// them costs a map lookup, one with them a compare per check. It never
// reports jobs ended.
func (m *Manager) Tick(nodeName string, t time.Time, descs []*metric.Desc, values []float64) []string {
	if len(descs) == 0 || len(values) != len(descs) {
		return nil
	}
	n := m.node(nodeName)
	if n == nil {
		return nil
	}
	n.mu.Lock()
	if n.from.IsZero() {
		n.from = t
	}
	n.last = t
	st := n.find(descs)
	if st == nil {
		st = n.scan(descs)
	}
	if len(st.refs) == 0 {
		n.mu.Unlock()
		return nil
	}
	var changes []change
	first := n.health.IsZero()
	n.health = t
	for _, r := range st.refs {
		if r.failure || r.check < 0 {
			continue
		}
		v := values[r.pos]
		if v != v { // NaN: no word on the check
			continue
		}
		c := &n.checks[r.check]
		c.seen = t
		failing := v == 0
		if failing == c.failing {
			if failing && c.reason != m.reasonOf(st, r.check) {
				c.reason = m.reasonOf(st, r.check) // a new reason is no new failure
				m.dirty.Store(true)
			}
			continue
		}
		c.failing = failing
		if failing {
			c.reason, c.since = m.reasonOf(st, r.check), t
		} else {
			c.reason, c.since = "", time.Time{}
		}
		changes = append(changes, change{check: c.name, reason: c.reason, failing: failing, t: t})
	}
	n.mu.Unlock()
	if len(changes) > 0 || first {
		m.changed(nodeName, changes)
	}
	return nil
}

// reasonOf is the reason label of check k's failure series in st.
func (m *Manager) reasonOf(st *stream, k int32) string {
	for _, r := range st.refs {
		if r.failure && r.check == k {
			return r.reason
		}
	}
	return ""
}

// node returns the state of a node, made on its first tick (nil past
// MaxNodes).
func (m *Manager) node(name string) *node {
	m.mu.RLock()
	n := m.nodes[name]
	m.mu.RUnlock()
	if n != nil {
		return n
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n = m.nodes[name]; n == nil {
		if len(m.nodes) >= m.maxNodes {
			m.m.untracked.Inc()
			return nil
		}
		n = &node{}
		m.nodes[name] = n
	}
	return n
}

// find returns the cached stream of descs; n.mu held.
func (n *node) find(descs []*metric.Desc) *stream {
	for i := range n.streams {
		s := &n.streams[i]
		if s.first == descs[0] && s.n == len(descs) && s.valid(descs) {
			return s
		}
	}
	return nil
}

func (s *stream) valid(descs []*metric.Desc) bool {
	for _, r := range s.refs {
		if descs[r.pos] != r.desc {
			return false
		}
	}
	return true
}

// scan finds the health series of a stream and caches them; n.mu held.
func (n *node) scan(descs []*metric.Desc) *stream {
	if len(n.streams) >= maxStreamsPerNode {
		n.streams = append(n.streams[:0], n.streams[1:]...)
	}
	s := stream{first: descs[0], n: len(descs)}
	for i, d := range descs {
		failure := d.Name == failureMetric
		if !failure && d.Name != okMetric {
			continue
		}
		var check, reason string
		for _, l := range d.Labels {
			switch l.Name {
			case "check":
				check = l.Value
			case "reason":
				reason = l.Value
			}
		}
		if check == "" || len(check) > maxCheckName {
			continue
		}
		r := ref{pos: int32(i), check: n.checkIndex(clean(check, maxCheckName)), failure: failure, desc: d}
		if failure {
			r.reason = clean(reason, maxReason)
		}
		s.refs = append(s.refs, r)
	}
	n.streams = append(n.streams, s)
	return &n.streams[len(n.streams)-1]
}

// checkIndex is the index of check in n.checks, added if new (-1 past
// maxChecksPerNode); n.mu held.
func (n *node) checkIndex(check string) int32 {
	for i := range n.checks {
		if n.checks[i].name == check {
			return int32(i)
		}
	}
	if len(n.checks) >= maxChecksPerNode {
		return -1
	}
	n.checks = append(n.checks, checkState{name: check})
	return int32(len(n.checks) - 1)
}

// clean makes s printable UTF-8 of at most max bytes: it goes into
// events, the API and Slurm's node reason.
func clean(s string, max int) string {
	ok := len(s) <= max
	for _, r := range s {
		if r == utf8.RuneError || r < ' ' || r == 0x7f {
			ok = false
			break
		}
	}
	if ok {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || r < ' ' || r == 0x7f {
			r = ' '
		}
		if b.Len()+utf8.RuneLen(r) > max {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// changed turns a node's transitions into events and tells the drainer.
func (m *Manager) changed(nodeName string, changes []change) {
	if len(changes) > 0 {
		m.dirty.Store(true)
	}
	for _, c := range changes {
		e := events.Event{Time: c.t, Node: nodeName, Labels: map[string]string{"check": c.check}, Link: "#/node/" + url.PathEscape(nodeName)}
		if c.failing {
			e.Kind, e.Severity = events.KindHealthFail, events.SeverityCritical
			e.Summary = nodeName + ": check " + c.check + " failed"
			if c.reason != "" {
				e.Summary += ": " + c.reason
				e.Labels["reason"] = c.reason
			}
		} else {
			e.Kind, e.Severity = events.KindHealthPass, events.SeverityInfo
			e.Summary = nodeName + ": check " + c.check + " passes again"
		}
		m.events.Emit(e)
	}
	m.m.transitions.Add(float64(len(changes)))
	if m.drainer != nil {
		m.drainer.notify(nodeName)
	}
}

// Failing returns the node's failing checks, by name (nil when none).
func (m *Manager) Failing(nodeName string) []Check {
	m.mu.RLock()
	n := m.nodes[nodeName]
	m.mu.RUnlock()
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.failing()
}

// heard tells whether the node sent health series since the start.
func (m *Manager) heard(nodeName string) bool {
	m.mu.RLock()
	n := m.nodes[nodeName]
	m.mu.RUnlock()
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.health.IsZero()
}

// failing lists n's failing checks; n.mu held.
func (n *node) failing() []Check {
	var out []Check
	for _, c := range n.checks {
		if c.failing {
			out = append(out, Check{Check: c.name, Reason: c.reason, Since: c.since})
		}
	}
	return out
}

// AllFailing returns every node with a failing check.
func (m *Manager) AllFailing() map[string][]Check {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string][]Check{}
	for name, n := range m.nodes {
		n.mu.Lock()
		if f := n.failing(); len(f) > 0 {
			out[name] = f
		}
		n.mu.Unlock()
	}
	return out
}

// failingNodes counts the nodes with a failing check.
func (m *Manager) failingNodes() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	k := 0
	for _, n := range m.nodes {
		n.mu.Lock()
		for _, c := range n.checks {
			if c.failing {
				k++
				break
			}
		}
		n.mu.Unlock()
	}
	return k
}

// sweep drops, as passing, the checks nodes stopped reporting while they
// kept reporting others (taken out of their configuration), and the
// checks of nodes that tick without health series for healthGone.
func (m *Manager) sweep() {
	type gone struct {
		node    string
		changes []change
	}
	var all []gone
	m.mu.RLock()
	for name, n := range m.nodes {
		n.mu.Lock()
		var changes []change
		keep := n.checks[:0]
		removed := false
		quiet := n.health
		if quiet.IsZero() {
			quiet = n.from
		}
		noHealth := !n.last.IsZero() && !quiet.IsZero() && n.last.Sub(quiet) > healthGone
		for _, c := range n.checks {
			if noHealth || !c.seen.IsZero() && n.health.Sub(c.seen) > checkGone {
				removed = true
				if c.failing {
					changes = append(changes, change{check: c.name, failing: false, t: n.last})
				}
				continue
			}
			keep = append(keep, c)
		}
		if removed {
			n.checks = keep
			n.streams = n.streams[:0] // their refs hold check indexes
		}
		n.mu.Unlock()
		if len(changes) > 0 {
			all = append(all, gone{name, changes})
		}
	}
	m.mu.RUnlock()
	for _, g := range all {
		m.changed(g.node, g.changes)
	}
}
