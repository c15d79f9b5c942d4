package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// TestStragglerMetric fills the store with a running 4-node job whose cn3
// idles for the last 10 minutes while its peers compute: one round of the
// watch flags cn3 alone as vigil_job_straggler 1; once cn3 catches up and
// the next round no longer flags it, its series is marked stale.
func TestStragglerMetric(t *testing.T) {
	srv, base := startServer(t)
	nodes := []string{"cn1", "cn2", "cn3", "cn4"}
	user := metric.NewDesc("vigil_job_cpu_user_seconds_total", "", metric.Counter, "jobid", "77")
	sys := metric.NewDesc("vigil_job_cpu_system_seconds_total", "", metric.Counter, "jobid", "77")
	cpus := metric.NewDesc("vigil_job_cpus", "", metric.Gauge, "jobid", "77")
	running := metric.NewDesc("vigil_job_running", "", metric.Gauge, "jobid", "77")
	descs := []*metric.Desc{running, user, sys, cpus}
	now := time.Now().Truncate(time.Second).Add(-16 * time.Minute) // room for the catch-up below
	start := now.Add(-20 * time.Minute)
	cpu := make([]float64, len(nodes))
	write := func(from, to time.Time, busy func(node int, t time.Time) float64) {
		for ts := from; !ts.After(to); ts = ts.Add(10 * time.Second) {
			for k, n := range nodes {
				cpu[k] += busy(k, ts) * 10
				if err := srv.Store().AppendTick(n, ts, descs, []float64{1, cpu[k], 0, 4}, true); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	slow := func(k int, ts time.Time) float64 {
		if k == 2 && ts.After(now.Add(-10*time.Minute)) {
			return 0.5
		}
		return 4
	}
	write(start, now, slow)
	j := &jobs.Job{ID: "77", User: "alice", Nodes: nodes, CPUs: 16, Start: start, State: jobs.StateRunning}
	if err := srv.Jobs().Index().Upsert(j); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	srv.stragglers.round(context.Background(), now)
	t.Logf("one round, one 4-node job over 15 minutes of 10 s samples: %v", time.Since(t0))
	got := strings.Join(flagged(t, base, now), " ")
	if got != "cn3/cpu" {
		t.Fatalf("flagged after the slow period: %q, want cn3/cpu", got)
	}
	// cn3 catches up: 15 minutes of equal work push the idle stretch out
	// of the judged window.
	later := now.Add(15 * time.Minute)
	write(now.Add(10*time.Second), later, func(int, time.Time) float64 { return 4 })
	srv.stragglers.round(context.Background(), later)
	if got := flagged(t, base, later); len(got) != 0 {
		t.Fatalf("still flagged after catching up: %v", got)
	}
	if n := srv.stragglers.flagged; len(n) != 0 {
		t.Fatalf("watch state after catching up: %v", n)
	}
}

// flagged returns node/metric of the vigil_job_straggler series at t.
func flagged(t *testing.T, base string, at time.Time) []string {
	t.Helper()
	var v struct {
		Data struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	q := url.Values{"query": {`vigil_job_straggler{jobid="77"} == 1`}, "time": {fmt.Sprint(at.Unix())}}
	body := getJSON(t, base+"/api/v1/query?"+q.Encode())
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err, body)
	}
	var out []string
	for _, r := range v.Data.Result {
		out = append(out, r.Metric["node"]+"/"+r.Metric["metric"])
	}
	return out
}
