package jobs

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
)

type eventLog struct {
	mu  sync.Mutex
	evs []events.Event
}

func (l *eventLog) Emit(e events.Event) { l.mu.Lock(); l.evs = append(l.evs, e); l.mu.Unlock() }

func (l *eventLog) list() []events.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]events.Event(nil), l.evs...)
}

// A job the nodes report yields one job_start when first seen running and
// one job_end when over; Slurm's later words about it (user, final state)
// yield none.
func TestJobStartEndEvents(t *testing.T) {
	log := &eventLog{}
	m := newManager(t, Options{EventSink: log})
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	d := schema("123")
	for i, n := range []string{"cn1", "cn2", "cn3", "cn4"} {
		m.Tick(n, t0.Add(time.Duration(i)*time.Millisecond), d, values(d, 1))
	}
	m.sweep(time.Now(), true)
	m.Tick("cn1", t0.Add(time.Second), d, values(d, 1)) // still running: no event
	m.sweep(time.Now(), true)
	evs := log.list()
	if len(evs) != 1 {
		t.Fatalf("after the start: %d events %+v, want one job_start", len(evs), evs)
	}
	e := evs[0]
	if e.Kind != events.KindJobStart || e.Job != "123" || !e.Time.Equal(t0) || e.Link != "#/jobs/123" ||
		e.Summary != "job 123 started on 4 nodes" || e.Labels["nodes"] != "4" || len(e.Nodes) != 4 || e.Node != "" {
		t.Fatalf("job_start %+v", e)
	}
	// Slurm tells the user: no new event.
	if _, err := m.Update("123", func(j *Job) { j.User = "alice" }); err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Minute)
	for _, n := range []string{"cn1", "cn2", "cn3", "cn4"} {
		m.Tick(n, end, d, values(d, 0))
	}
	m.sweep(time.Now(), true)
	if _, err := m.Update("123", func(j *Job) { j.State = StateCompleted }); err != nil {
		t.Fatal(err)
	}
	evs = log.list()
	if len(evs) != 2 {
		t.Fatalf("after the end: %d events %+v, want job_start, job_end", len(evs), evs)
	}
	e = evs[1]
	if e.Kind != events.KindJobEnd || !e.Time.Equal(end) || e.Summary != "job 123 (user alice) ended on 4 nodes" ||
		e.Labels["user"] != "alice" || e.Severity != events.SeverityInfo {
		t.Fatalf("job_end %+v", e)
	}
}

// A job Slurm reports failed when first heard of yields only its end, a
// warning.
func TestJobEndOnlyEvent(t *testing.T) {
	log := &eventLog{}
	m := newManager(t, Options{EventSink: log})
	if _, err := m.Update("7", func(j *Job) { j.State, j.User, j.Nodes = StateFailed, "bob", []string{"cn9"} }); err != nil {
		t.Fatal(err)
	}
	evs := log.list()
	if got := fmt.Sprintf("%d %+v", len(evs), evs); len(evs) != 1 || evs[0].Kind != events.KindJobEnd ||
		evs[0].Severity != events.SeverityWarning || evs[0].Node != "cn9" || evs[0].Summary != "job 7 (user bob) ended (failed) on cn9" {
		t.Fatalf("events %s", got)
	}
}
