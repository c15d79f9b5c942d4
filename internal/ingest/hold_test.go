package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

type tempErr struct{}

func (tempErr) Error() string   { return "disk full" }
func (tempErr) Temporary() bool { return true }

// flakyStore refuses with a temporary error while full is set.
type flakyStore struct {
	mu    sync.Mutex
	full  bool
	calls map[string]int // successful calls by method
}

func (s *flakyStore) do(what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full {
		return tempErr{}
	}
	s.calls[what]++
	return nil
}

func (s *flakyStore) setFull(v bool) { s.mu.Lock(); s.full = v; s.mu.Unlock() }
func (s *flakyStore) count(what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[what]
}

func (s *flakyStore) AppendTick(string, time.Time, []*metric.Desc, []float64, bool) error {
	return s.do("tick")
}
func (s *flakyStore) SetUp(string, time.Time, bool) error    { return s.do("up") }
func (s *flakyStore) Gap(string, time.Time, time.Time) error { return s.do("gap") }

// Without root: ticks, gaps and node-down frames wait for a store that
// cannot write and go in once it can; at shutdown a held frame is given up
// and counted as unkept.
func TestHoldUntilStoreWrites(t *testing.T) {
	st := &flakyStore{full: true, calls: map[string]int{}}
	h := New(st, time.Hour, nil)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); h.Run(ctx) }()
	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Tick("cn01", t0, []*metric.Desc{metric.NewDesc("x", "", metric.Gauge)}, []float64{1})
		h.Gap("cn01", t0.Add(-time.Minute), t0)
		h.NodeState("cn01", false, t0.Add(time.Second))
	}()
	waitFor(t, "held", func() bool { return h.holding.Load() == 1 })
	select {
	case <-done:
		t.Fatal("frames handled while the store cannot write")
	default:
	}
	st.setFull(false)
	<-done
	if st.count("tick") != 1 || st.count("gap") != 2 || st.count("up") != 1 || h.Unkept() != 0 {
		t.Errorf("after the store recovered: %v, unkept %d; want 1 tick, 2 gaps, 1 up=0, 0 unkept", st.calls, h.Unkept())
	}
	st.setFull(true)
	held := make(chan struct{})
	go func() { defer close(held); h.Tick("cn01", t0.Add(2*time.Second), nil, nil) }()
	waitFor(t, "held again", func() bool { return h.holding.Load() == 1 })
	cancel()
	<-runDone
	<-held
	if h.Unkept() != 1 {
		t.Errorf("unkept = %d after giving up at shutdown, want 1", h.Unkept())
	}
}

// A frame held longer than maxHold is given up: unkept, so the wire
// server closes its connection before acknowledging it.
func TestHoldGivesUpAfterMaxHold(t *testing.T) {
	st := &flakyStore{full: true, calls: map[string]int{}}
	h := New(st, time.Hour, nil)
	h.maxHold = 50 * time.Millisecond
	h.Tick("cn01", time.Now(), nil, nil)
	if h.Unkept() != 1 || st.count("tick") != 0 {
		t.Errorf("after maxHold: unkept %d, %d ticks stored; want 1, 0", h.Unkept(), st.count("tick"))
	}
}
