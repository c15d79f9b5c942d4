package drain

import (
	"context"
	"errors"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
)

// ReasonPrefix starts the reason of every node Vigil drains: a node whose
// reason starts otherwise was drained (or re-drained) by someone else and
// is never resumed by Vigil.
const ReasonPrefix = "vigil:"

const (
	opShow   = "show"
	opDrain  = "drain"
	opResume = "resume"
)

// NodeInfo is what the scheduler says of a node.
type NodeInfo struct {
	State  string // as scontrol prints it, e.g. IDLE+DRAIN
	Reason string // without Slurm's " [user@time]" suffix; "" when none
}

// Drained tells whether the node is drained or draining.
func (i NodeInfo) Drained() bool {
	for _, f := range strings.Split(i.State, "+") {
		if f == "DRAIN" || f == "DRAINED" || f == "DRAINING" {
			return true
		}
	}
	return false
}

// Scheduler drains and resumes nodes. Each call is bounded in time by
// the implementation.
type Scheduler interface {
	Node(ctx context.Context, name string) (NodeInfo, error)
	Drain(ctx context.Context, name, reason string) error
	Resume(ctx context.Context, name string) error
}

// ErrNoNode is the scheduler's answer for a node it does not know.
var ErrNoNode = errors.New("no such node in the scheduler")

// drainer drains failing nodes and resumes the nodes it drained, one
// command at a time from its own goroutine, never on the ingest path.
type drainer struct {
	m     *Manager
	sched Scheduler
	retry time.Duration
	wake  chan struct{}

	mu      sync.Mutex
	drained map[string]Record
	pending map[string]struct{}  // nodes whose state changed
	later   map[string]time.Time // nodes whose command failed: when to try again
	held    map[string]string    // failing nodes someone else drained: their reason (said once)
	lastErr map[string]string    // per op, so each new failure is logged once
}

func newDrainer(m *Manager, s Scheduler, retry time.Duration, rec map[string]Record) *drainer {
	if retry <= 0 {
		retry = 30 * time.Second
	}
	if rec == nil {
		rec = map[string]Record{}
	}
	d := &drainer{m: m, sched: s, retry: retry, wake: make(chan struct{}, 1), drained: rec,
		pending: map[string]struct{}{}, later: map[string]time.Time{}, held: map[string]string{}, lastErr: map[string]string{}}
	for n := range rec { // resumed, if every check passes, once the node is heard
		d.pending[n] = struct{}{}
	}
	return d
}

// notify queues a node whose health changed (or was first heard).
func (d *drainer) notify(node string) {
	d.mu.Lock()
	if len(d.pending) < d.m.maxNodes {
		d.pending[node] = struct{}{}
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *drainer) records() map[string]Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.drained)
}

func (d *drainer) run(ctx context.Context) {
	t := time.NewTicker(min(d.retry, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C:
		}
		d.mu.Lock()
		work := d.pending
		d.pending = map[string]struct{}{}
		now := time.Now()
		for n, at := range d.later {
			if !now.Before(at) {
				work[n] = struct{}{}
				delete(d.later, n)
			}
		}
		d.mu.Unlock()
		for n := range work {
			if ctx.Err() != nil {
				return
			}
			if !d.step(ctx, n) {
				d.mu.Lock()
				if _, queued := d.pending[n]; !queued {
					d.later[n] = time.Now().Add(d.retry)
				}
				d.mu.Unlock()
			}
		}
	}
}

// step brings one node's scheduler state in line with its checks; false:
// a command failed, try again later.
func (d *drainer) step(ctx context.Context, node string) bool {
	if !validNodeName(node) {
		return true // never handed to the scheduler: it could name several nodes
	}
	failing := d.m.Failing(node)
	d.mu.Lock()
	_, ours := d.drained[node]
	if len(failing) == 0 {
		delete(d.held, node) // said again should it fail again
	}
	d.mu.Unlock()
	heard := d.m.heard(node)
	if len(failing) == 0 && (!ours || !heard) {
		return true // a drained node not heard since a restart stays drained until it is
	}
	if len(failing) > 0 && ours {
		return true // drained already
	}
	info, err := d.sched.Node(ctx, node)
	if errors.Is(err, ErrNoNode) {
		d.say(node, "not a node of the scheduler; left alone")
		return true
	}
	if !d.result(opShow, err) {
		return false
	}
	if len(failing) > 0 {
		if info.Reason != "" && !strings.HasPrefix(info.Reason, ReasonPrefix) {
			d.say(node, "failing, but taken out of service by someone else: left alone (reason "+info.Reason+")")
			return true
		}
		reason := drainReason(failing)
		if !info.Drained() { // else drained by Vigil and its record lost: adopted
			if !d.result(opDrain, d.sched.Drain(ctx, node, reason)) {
				return false
			}
			d.m.m.actions.WithLabelValues(opDrain).Inc()
		} else {
			reason = info.Reason
		}
		d.mu.Lock()
		d.drained[node] = Record{Reason: reason, Time: time.Now()}
		delete(d.held, node)
		d.mu.Unlock()
		d.m.dirty.Store(true)
		d.m.log.Warn("drained a node whose health check fails", "node", node, "reason", reason)
		d.m.events.Emit(events.Event{Time: time.Now(), Kind: events.KindDrain, Node: node, Severity: events.SeverityWarning,
			Summary: node + ": drained in Slurm: " + reason, Labels: map[string]string{"reason": reason}, Link: "#/node/" + url.PathEscape(node)})
		return true
	}
	// Every check passes, and Vigil drained the node: resume it if it is
	// still drained for Vigil's reason.
	if info.Drained() && strings.HasPrefix(info.Reason, ReasonPrefix) {
		if !d.result(opResume, d.sched.Resume(ctx, node)) {
			return false
		}
		d.m.m.actions.WithLabelValues(opResume).Inc()
		d.m.log.Info("resumed a node whose health checks pass again", "node", node)
		d.m.events.Emit(events.Event{Time: time.Now(), Kind: events.KindResume, Node: node, Severity: events.SeverityInfo,
			Summary: node + ": resumed in Slurm: every health check passes", Link: "#/node/" + url.PathEscape(node)})
	} else {
		d.m.log.Info("a node vigil drained was resumed or re-drained by someone else; left as it is",
			"node", node, "state", info.State, "reason", info.Reason)
	}
	d.mu.Lock()
	delete(d.drained, node)
	d.mu.Unlock()
	d.m.dirty.Store(true)
	return true
}

// result counts and logs (once per new message) a failed command.
func (d *drainer) result(op string, err error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		if d.lastErr[op] != "" {
			delete(d.lastErr, op)
			d.m.log.Info("scheduler answering again", "op", op)
		}
		return true
	}
	d.m.m.errors.WithLabelValues(op).Inc()
	if msg := err.Error(); msg != d.lastErr[op] {
		d.lastErr[op] = msg
		d.m.log.Warn("scheduler command failed; retrying later", "op", op, "err", err)
	}
	return false
}

// say logs what happens to a node once, until it changes.
func (d *drainer) say(node, what string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held[node] == what || len(d.held) >= d.m.maxNodes {
		return
	}
	d.held[node] = what
	d.m.log.Info("node "+what, "node", node)
}

// drainReason names the check that failed first.
func drainReason(failing []Check) string {
	c := failing[0]
	for _, f := range failing[1:] {
		if f.Since.Before(c.Since) {
			c = f
		}
	}
	r := ReasonPrefix + " " + c.Check
	if c.Reason != "" {
		r += ": " + c.Reason
	} else {
		r += ": failed"
	}
	return r
}

// validNodeName keeps hostlist expressions, ALL and options away from
// the scheduler: a node's name comes from the wire.
func validNodeName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' || strings.EqualFold(s, "ALL") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
