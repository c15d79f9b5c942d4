// Package events is Vigil's one event stream: node up/down, alerts firing
// and resolved, health-check state changes, new log patterns, job start and
// end, aggregator failover and gaps (docs/events.md).
package events

import "time"

// Kinds of event. Producers use these constants so filters stay stable.
const (
	KindNodeUp        = "node_up"
	KindNodeDown      = "node_down"
	KindAlertFiring   = "alert_firing"
	KindAlertResolved = "alert_resolved"
	KindHealthFail    = "health_fail"
	KindHealthPass    = "health_pass"
	KindLogPattern    = "log_new_pattern"
	KindJobStart      = "job_start"
	KindJobEnd        = "job_end"
	KindFailover      = "failover"
	KindGap           = "gap"
	KindDrain         = "drain"  // Vigil drained a node in the scheduler
	KindResume        = "resume" // Vigil resumed a node it had drained
)

// Severities, least to most severe.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// Event is one thing that happened. Node and Job are empty when the event
// concerns neither.
type Event struct {
	ID   uint64    `json:"id"` // assigned by the store, increasing
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	Node string    `json:"node,omitempty"`
	// Nodes are the nodes concerned when there are several (a job's);
	// the node filter matches Node or any of them.
	Nodes    []string          `json:"nodes,omitempty"`
	Job      string            `json:"job,omitempty"`
	Severity string            `json:"severity"`
	Summary  string            `json:"summary"`
	Labels   map[string]string `json:"labels,omitempty"`
	Link     string            `json:"link,omitempty"` // a dashboard path, e.g. "#/node/cn1"
}

// Sink takes events. Emit never blocks on I/O for long and never fails the
// caller: a sink that cannot keep up counts and drops.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// Discard is a Sink that drops everything (the default when none is set).
var Discard Sink = SinkFunc(func(Event) {})
