package jobs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
)

// started says whether a job in state s has begun (running, or over).
func started(s State) bool {
	return s == StateRunning || s.Done() || s == "suspended" || s == "completing"
}

// emit sends job_start when j is first known started and job_end when it
// is first known over; was is its state before the change ("" when new).
// A job first heard of when already over gets only its end.
func (m *Manager) emit(j *Job, was State) {
	switch {
	case j.State == StateRunning && !started(was):
		m.sink.Emit(jobEvent(j, events.KindJobStart, "started", j.Start, events.SeverityInfo))
	case j.State.Done() && !was.Done():
		sev := events.SeverityInfo
		switch j.State {
		case StateFailed, StateTimeout, StateOOM, StateNodeFail:
			sev = events.SeverityWarning
		}
		verb := "ended"
		if j.State != StateEnded {
			verb = "ended (" + string(j.State) + ")"
		}
		m.sink.Emit(jobEvent(j, events.KindJobEnd, verb, j.End, sev))
	}
}

// jobEvent is "job 123 (user alice) started on 4 nodes".
func jobEvent(j *Job, kind, verb string, t time.Time, sev string) events.Event {
	var b strings.Builder
	b.WriteString("job ")
	b.WriteString(j.ID)
	if j.User != "" {
		fmt.Fprintf(&b, " (user %s)", j.User)
	}
	b.WriteString(" " + verb)
	switch len(j.Nodes) {
	case 0:
	case 1:
		b.WriteString(" on " + j.Nodes[0])
	default:
		fmt.Fprintf(&b, " on %d nodes", len(j.Nodes))
	}
	e := events.Event{Time: t, Kind: kind, Job: j.ID, Severity: sev, Summary: b.String(), Link: "#/jobs/" + j.ID,
		Labels: map[string]string{"state": string(j.State), "nodes": strconv.Itoa(len(j.Nodes))}}
	if len(j.Nodes) == 1 {
		e.Node = j.Nodes[0]
	} else {
		e.Nodes = j.Nodes // the store keeps the first events.MaxNodes
	}
	for k, v := range map[string]string{"user": j.User, "partition": j.Partition, "account": j.Account, "name": j.Name} {
		if v != "" {
			e.Labels[k] = v
		}
	}
	if kind == events.KindJobEnd && j.ExitCode != 0 {
		e.Labels["exit_code"] = strconv.Itoa(j.ExitCode)
	}
	return e
}
