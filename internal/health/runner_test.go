//go:build linux

package health

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func status(r *Runner, i int) Status { return r.Snapshot(nil)[i] }

func TestRunnerScheduleAndCounts(t *testing.T) {
	var runs atomic.Int32
	flaky := &Check{Name: "flaky", Interval: time.Second, Timeout: time.Second, run: func(context.Context, *env) outcome {
		if runs.Add(1)%2 == 1 {
			return fail("odd run\nsecond line")
		}
		return pass()
	}}
	r := NewRunner([]*Check{flaky}, kernfs.NewFS("/"), 2, nil)
	if r.Snapshot(nil)[0].Done {
		t.Fatal("result before any run")
	}
	g0 := r.Gen()
	r.Start()
	defer r.Close()
	<-r.FirstRound()
	s := status(r, 0)
	if !s.Done || s.OK || s.Reason != "odd run" || s.Failed != 1 || s.Timeouts != 0 || r.Gen() == g0 {
		t.Fatalf("first run: %+v", s)
	}
	waitFor(t, "the second run", func() bool { return runs.Load() >= 2 })
	waitFor(t, "its result", func() bool { return status(r, 0).OK })
	if s := status(r, 0); s.Reason != "" || s.Failed != 1 {
		t.Fatalf("second run: %+v", s)
	}
}

func TestRunnerConcurrencyBound(t *testing.T) {
	var cur, peak atomic.Int32
	slow := func(context.Context, *env) outcome {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
		cur.Add(-1)
		return pass()
	}
	var checks []*Check
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		checks = append(checks, &Check{Name: n, Interval: time.Minute, Timeout: time.Second, run: slow})
	}
	r := NewRunner(checks, kernfs.NewFS("/"), 2, nil)
	start := time.Now()
	r.Start()
	defer r.Close()
	<-r.FirstRound()
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("6 runs of 50ms at 2 at a time took %v", took)
	}
}

func TestRunnerHungCheck(t *testing.T) {
	release := make(chan struct{})
	var runs atomic.Int32
	stuck := &Check{Name: "statfs", Interval: time.Second, Timeout: 50 * time.Millisecond, run: func(context.Context, *env) outcome {
		if runs.Add(1) == 1 {
			<-release // a system call that ignores the timeout
		}
		return pass()
	}}
	other := &Check{Name: "other", Interval: time.Second, Timeout: time.Second, run: func(context.Context, *env) outcome { return pass() }}
	r := NewRunner([]*Check{stuck, other}, kernfs.NewFS("/"), 1, nil)
	r.Start()
	defer r.Close()
	<-r.FirstRound()
	s := status(r, 0)
	if s.OK || s.Timeouts != 1 || s.Failed != 1 || s.Reason != "timed out after 50ms: did not return" {
		t.Fatalf("hung: %+v", s)
	}
	if !status(r, 1).OK {
		t.Fatal("the other check did not run past the hung one (concurrency 1)")
	}
	// Next interval: not started again, counted as another timeout.
	waitFor(t, "the second interval", func() bool { return status(r, 0).Timeouts == 2 })
	if s := status(r, 0); s.Reason != "timed out after 50ms: an earlier run has not returned" || runs.Load() != 1 {
		t.Fatalf("still hung: %+v, runs %d", s, runs.Load())
	}
	close(release)
	waitFor(t, "a run after the hung one returned", func() bool { return status(r, 0).OK })
	if runs.Load() != 2 {
		t.Fatalf("runs %d", runs.Load())
	}
}

func TestRunnerPanicIsFailure(t *testing.T) {
	c := &Check{Name: "p", Interval: time.Minute, Timeout: time.Second, run: func(context.Context, *env) outcome { panic("boom") }}
	r := NewRunner([]*Check{c}, kernfs.NewFS("/"), 1, nil)
	r.Start()
	defer r.Close()
	<-r.FirstRound()
	if s := status(r, 0); s.OK || s.Reason != "check panicked: boom" {
		t.Fatalf("%+v", s)
	}
}

func TestRunnerCloseKillsCommands(t *testing.T) {
	pidf := t.TempDir() + "/pid"
	cs, err := Compile([]CheckConfig{{Name: "sleepy", Type: "script", Path: script(t, `echo $$ > `+pidf+`; exec sleep 1000`)}}, time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(cs, kernfs.NewFS("/"), 1, nil)
	r.Start()
	waitFor(t, "the script to start", func() bool { b, _ := readPidFile(pidf); return b })
	ps := pids(t, pidf)
	start := time.Now()
	r.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v", took)
	}
	waitGone(t, ps)
	if s := status(r, 0); s.Done {
		t.Fatalf("a run cut short by Close was recorded: %+v", s)
	}
}

func readPidFile(p string) (bool, error) {
	n, err := readAll(p)
	return len(n) > 0 && n[len(n)-1] == '\n', err
}
