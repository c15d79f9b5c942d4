package sampler

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// These tests run on the real clock: the kernel timer does not follow
// testing/synctest's fake one.

func TestKernelTimerIsUsed(t *testing.T) {
	w := newWaiter(context.Background())
	defer w.close()
	if _, ok := w.(*kernelTimer); !ok {
		t.Fatalf("newWaiter on Linux returned %T, want *kernelTimer", w)
	}
}

// timedPlugin records the tick times it gets and when it actually ran.
type timedPlugin struct {
	fakePlugin
	ran []time.Time
}

func (p *timedPlugin) Sample(ctx context.Context, now time.Time, b *metric.Batch) error {
	p.ran = append(p.ran, time.Now())
	return p.fakePlugin.Sample(ctx, now, b)
}

func runKernelTimer(t *testing.T, p Plugin, iv, d time.Duration) *Scheduler {
	t.Helper()
	s, err := NewScheduler([]Instance{{Name: "p", Plugin: p, Interval: iv}}, nil, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.UseKernelTimer()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKernelTimerTicksAligned(t *testing.T) {
	const iv = 20 * time.Millisecond
	p := &timedPlugin{}
	s := runKernelTimer(t, p, iv, 300*time.Millisecond)
	if n := len(p.calls); n < 5 {
		t.Fatalf("%d ticks in 300ms at %v, want at least 5", n, iv)
	}
	if got := s.Stats().Ticks.Load(); got != uint64(len(p.calls)) {
		t.Errorf("ticks = %d, calls = %d", got, len(p.calls))
	}
	for i, c := range p.calls {
		if c.UnixNano()%int64(iv) != 0 {
			t.Errorf("tick %v not aligned to %v", c, iv)
		}
		if p.ran[i].Before(c) {
			t.Errorf("tick for %v ran early, at %v", c, p.ran[i])
		}
		if i > 0 && !c.After(p.calls[i-1]) {
			t.Errorf("tick %d (%v) not after the previous (%v)", i, c, p.calls[i-1])
		}
	}
}

func TestKernelTimerOverrun(t *testing.T) {
	const iv = 20 * time.Millisecond
	slow := &timedPlugin{fakePlugin: fakePlugin{sleep: 50 * time.Millisecond}}
	s := runKernelTimer(t, slow, iv, 400*time.Millisecond)
	st := s.Stats()
	if st.Overruns.Load() < 1 || st.Ticks.Load() < 2 {
		t.Fatalf("overruns = %d, ticks = %d; want >= 1 and >= 2", st.Overruns.Load(), st.Ticks.Load())
	}
	for i, c := range slow.calls {
		if c.UnixNano()%int64(iv) != 0 {
			t.Errorf("tick %v not aligned to %v", c, iv)
		}
		if i > 0 && c.Sub(slow.calls[i-1]) < 2*iv {
			t.Errorf("tick %d only %v after the previous: queued, not skipped", i, c.Sub(slow.calls[i-1]))
		}
	}
}

// A long wait must end when ctx does, not at the next tick.
func TestKernelTimerCancel(t *testing.T) {
	p := &fakePlugin{}
	start := time.Now()
	runKernelTimer(t, p, time.Hour, 50*time.Millisecond)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Run returned %v after ctx ended", el-50*time.Millisecond)
	}
	if len(p.calls) != 0 {
		t.Errorf("%d ticks of a 1h interval in 50ms", len(p.calls))
	}
}

func TestKernelTimerWaitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	k, err := newKernelTimer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	past := time.Now().Add(-time.Second) // an armed past instant fires at once
	ctx := context.Background()
	if a := testing.AllocsPerRun(100, func() {
		if err := k.wait(ctx, past); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per wait, want 0", a)
	}
}

// A tick due before the wait parks (the first read is skipped) must still
// wake it: the expiry is an edge the poller keeps.
func TestKernelTimerDueBeforePark(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k, err := newKernelTimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer k.close()
	for i, d := range []time.Duration{-time.Second, 0, time.Microsecond, 50 * time.Microsecond} {
		for range 20 {
			next := time.Now().Add(d)
			if err := k.wait(ctx, next); err != nil {
				t.Fatalf("case %d (%v): %v", i, d, err)
			}
			if now := time.Now(); now.Before(next) {
				t.Fatalf("case %d (%v): woke at %v, before %v", i, d, now, next)
			}
		}
	}
}
