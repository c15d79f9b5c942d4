package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// TestSweepDropsChurnedSeries: a series a node no longer sends (a finished
// process's) leaves the node's cache after a whole CacheIdle period
// without appends, while the node's other series stay cached; a series
// that comes back is cached again.
func TestSweepDropsChurnedSeries(t *testing.T) {
	const idle = 50 * time.Millisecond
	s, err := Open(Options{Dir: t.TempDir(), CacheIdle: idle})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	proc := func(pid int) *metric.Desc {
		return metric.NewDesc("proc_cpu_seconds_total", "CPU time.", metric.Counter, "pid", strconv.Itoa(pid))
	}
	stable := []*metric.Desc{load1, cpuU}
	ts := base
	tick := func(extra ...*metric.Desc) {
		t.Helper()
		ts = ts.Add(time.Second)
		d := append(append([]*metric.Desc(nil), stable...), extra...)
		if err := s.AppendTick("cn01", ts, d, make([]float64, len(d)), true); err != nil {
			t.Fatal(err)
		}
	}
	gone := proc(100)
	tick(gone)
	if n := s.Stats().CachedSeries; n != 4 { // two stable, the process, up
		t.Fatalf("cached %d series, want 4", n)
	}
	// Two periods of CacheIdle with the process gone, another in its
	// place, and the node busy.
	next := proc(200)
	for range 2 {
		time.Sleep(idle + 10*time.Millisecond)
		tick(next)
		s.sweep()
	}
	if n := s.Stats().CachedSeries; n != 4 {
		t.Errorf("cached %d series after the process left, want 4 (two stable, the new process, up)", n)
	}
	nc := s.nodes["cn01"]
	if nc == nil {
		t.Fatal("a busy node's cache was dropped")
	}
	if _, ok := nc.series[gone]; ok {
		t.Error("the finished process's series is still cached")
	}
	for _, d := range append(stable, upDesc) {
		if _, ok := nc.series[d]; !ok {
			t.Errorf("%s left the cache while in use", d.Name)
		}
	}
	tick(gone)
	if _, ok := nc.series[gone]; !ok || s.Stats().CachedSeries != 5 {
		t.Errorf("a returning series was not cached again (cached %d)", s.Stats().CachedSeries)
	}
}
