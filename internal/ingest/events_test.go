package ingest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// eventLog records the events a sink gets.
type eventLog struct {
	mu  sync.Mutex
	evs []events.Event
}

func (l *eventLog) Emit(e events.Event) { l.mu.Lock(); l.evs = append(l.evs, e); l.mu.Unlock() }

func (l *eventLog) kinds(node string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.evs {
		if e.Node == node {
			out = append(out, e.Kind)
		}
	}
	return out
}

// A node falling silent yields one node_down (critical, linked to the
// node), however many sweeps see it down; its return yields one node_up.
// A node's first tick is no event.
func TestNodeDownUpEvents(t *testing.T) {
	log := &eventLog{}
	h := NewWithOptions(nopStore{}, Options{Interval: 20 * time.Millisecond, Logger: quiet(), Events: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	tick := func(node string) { h.Tick(node, time.Now(), []*metric.Desc{load1}, []float64{1}) }
	tick("cn1")
	tick("cn2")
	// cn2 keeps ticking; cn1 falls silent for 10 intervals.
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tick("cn2")
	}
	for deadline := time.Now().Add(10 * time.Second); len(log.kinds("cn1")) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no node_down for cn1 within 10 s")
		}
		tick("cn2")
	}
	if got := fmt.Sprint(log.kinds("cn1")); got != "[node_down]" {
		t.Fatalf("cn1 events %s, want one node_down", got)
	}
	if got := log.kinds("cn2"); len(got) != 0 {
		t.Fatalf("cn2 kept ticking but has events %v", got)
	}
	log.mu.Lock()
	e := log.evs[0]
	log.mu.Unlock()
	if e.Severity != events.SeverityCritical || e.Link != "#/node/cn1" || e.Summary == "" {
		t.Fatalf("node_down event %+v", e)
	}
	tick("cn1")
	tick("cn1")
	if got := fmt.Sprint(log.kinds("cn1")); got != "[node_down node_up]" {
		t.Fatalf("cn1 events after its return %s, want node_down node_up", got)
	}
}

// A node an aggregator reports down yields one node_down however often
// the report repeats; a wire gap yields a gap event.
func TestReportedDownAndGapEvents(t *testing.T) {
	log := &eventLog{}
	h := NewWithOptions(nopStore{}, Options{Interval: time.Second, Logger: quiet(), Events: log})
	now := time.Now()
	h.Tick("cn1", now, []*metric.Desc{load1}, []float64{1})
	h.NodeState("cn1", false, now.Add(time.Second)) // up here: its silence decides
	for range 3 {
		h.NodeState("cn4", false, now.Add(time.Second))
	}
	from, to := now.Add(-time.Minute), now.Add(-time.Minute+1500*time.Millisecond)
	h.Gap("cn3", from, to)
	if got := log.kinds("cn1"); len(got) != 0 {
		t.Fatalf("reported down while ticking here: %v, want no event", got)
	}
	if got := fmt.Sprint(log.kinds("cn4")); got != "[node_down]" {
		t.Fatalf("reported down thrice: %s, want one node_down", got)
	}
	if got := fmt.Sprint(log.kinds("cn3")); got != "[gap]" {
		t.Fatalf("gap: %s", got)
	}
	log.mu.Lock()
	g := log.evs[len(log.evs)-1]
	log.mu.Unlock()
	if !g.Time.Equal(from) || g.Severity != events.SeverityInfo || g.Labels["to"] != to.UTC().Format(time.RFC3339Nano) {
		t.Fatalf("gap event %+v", g)
	}
}

// An aggregator's own stream going silent is a failover of its children
// as well as its node_down; a node's stream is not.
func TestAggregatorDownIsFailover(t *testing.T) {
	log := &eventLog{}
	h := NewWithOptions(nopStore{}, Options{Interval: 20 * time.Millisecond, Logger: quiet(), Events: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	aggDescs := []*metric.Desc{metric.NewDesc("vigil_aggregator_children", "", metric.Gauge)}
	h.Schema("agg1", aggDescs)
	h.Tick("agg1", time.Now(), aggDescs, []float64{3})
	h.Schema("cn1", []*metric.Desc{load1})
	h.Tick("cn1", time.Now(), []*metric.Desc{load1}, []float64{1})
	for deadline := time.Now().Add(10 * time.Second); len(log.kinds("agg1")) < 2 || len(log.kinds("cn1")) < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("events after both fell silent: agg1 %v, cn1 %v", log.kinds("agg1"), log.kinds("cn1"))
		}
	}
	if got := fmt.Sprint(log.kinds("agg1")); got != "[node_down failover]" {
		t.Fatalf("agg1 events %s, want node_down failover", got)
	}
	if got := fmt.Sprint(log.kinds("cn1")); got != "[node_down]" {
		t.Fatalf("cn1 events %s, want node_down only", got)
	}
}
