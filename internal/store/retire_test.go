package store

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// A job that ended on a node: its series get a stale marker at the next
// tick's time, the node's other series and other jobs' do not, and the
// job's descriptors leave the cache.
func TestRetire(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	cpuA := metric.NewDesc("vigil_job_cpus", "", metric.Gauge, "jobid", "7")
	memA := metric.NewDesc("vigil_job_memory_used_bytes", "", metric.Gauge, "jobid", "7")
	cpuB := metric.NewDesc("vigil_job_cpus", "", metric.Gauge, "jobid", "8")
	descs := []*metric.Desc{load1, cpuA, memA, cpuB}
	if err := s.AppendTick("cn1", base, descs, []float64{1, 4, 1e9, 2}, true); err != nil {
		t.Fatal(err)
	}
	cachedBefore := s.cached
	next := base.Add(time.Second)
	n, err := s.Retire("cn1", next, "jobid", "7")
	if err != nil || n != 2 {
		t.Fatalf("Retire = %d, %v; want 2 series ended", n, err)
	}
	if s.cached != cachedBefore-2 {
		t.Errorf("cached series %d, want %d", s.cached, cachedBefore-2)
	}
	q, err := s.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	set := q.Select(t.Context(), true, nil, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn1"))
	stale := map[string]bool{}
	for set.Next() {
		sr := set.At()
		it := sr.Iterator(nil)
		for it.Next() != 0 {
			if ts, v := it.At(); ts == next.UnixMilli() && value.IsStaleNaN(v) {
				stale[sr.Labels().Get("__name__")+"/"+sr.Labels().Get("jobid")] = true
			}
		}
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"vigil_job_cpus/7": true, "vigil_job_memory_used_bytes/7": true}
	if len(stale) != len(want) || !stale["vigil_job_cpus/7"] || !stale["vigil_job_memory_used_bytes/7"] {
		t.Errorf("stale-marked series %v, want %v", stale, want)
	}
	// Nothing left to end; an unknown node is no error.
	if n, err := s.Retire("cn1", next.Add(time.Second), "jobid", "7"); n != 0 || err != nil {
		t.Errorf("second Retire = %d, %v", n, err)
	}
	if n, err := s.Retire("cn9", next, "jobid", "7"); n != 0 || err != nil {
		t.Errorf("Retire of an unknown node = %d, %v", n, err)
	}
}
