package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// TestJobsFromStream streams a node's ticks with the jobs plugin's
// series over the wire (ingest's tap): the job is listed running with
// its node while the ticks say 1, ended once they say 0.
func TestJobsFromStream(t *testing.T) {
	data := t.TempDir()
	fast := func(c *Config) { c.Data = data; c.Interval = duration.Duration(100 * time.Millisecond) }
	_, srv, addr := startServerStream(t, true, fast)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "cn7", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(ctx) }()
	st := c.NewStream("cn7")
	load := metric.NewDesc("node_load1", "", metric.Gauge)
	running := metric.NewDesc("vigil_job_running", "", metric.Gauge, "jobid", "4242")
	cpus := metric.NewDesc("vigil_job_cpus", "", metric.Gauge, "jobid", "4242")
	user := metric.NewDesc("vigil_job_cpu_user_seconds_total", "", metric.Counter, "jobid", "4242")
	var first time.Time
	send := func(v float64, withJob bool) {
		var b metric.Batch
		b.Reset(time.Now())
		b.Add(load, 1)
		if withJob {
			if first.IsZero() {
				first = b.Time
			}
			b.Add(running, v)
			b.Add(cpus, 4)
			b.Add(user, 2*b.Time.Sub(first).Seconds()) // 2 of its 4 CPUs busy
		}
		c.Tick(st, b.Time, b.Descs, b.Values)
	}
	job := func(srv string) (int, jobs.Job) {
		resp, err := http.Get(srv + "/api/v1/jobs/4242")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct{ Data jobs.Job }
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v.Data
	}
	send(1, false)
	if code, _ := job(srv); code != http.StatusNotFound {
		t.Fatalf("an unknown job answered %d", code)
	}
	start := time.Now()
	var j jobs.Job
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		send(1, true)
		if code, got := job(srv); code == 200 {
			j = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("job 4242 not listed 10 s after its first tick")
		}
	}
	if j.State != jobs.StateRunning || len(j.Nodes) != 1 || j.Nodes[0] != "cn7" || j.Start.Before(start.Add(-time.Second)) {
		t.Fatalf("job while running: %+v", j)
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		send(1, true)
	}
	send(0, true)
	time.Sleep(5 * time.Millisecond) // ticks are at least 1 ms apart (1 Hz in life)
	send(1, false)
	for deadline := time.Now().Add(10 * time.Second); j.State != jobs.StateEnded; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job 4242 is %+v 10 s after its running 0", j)
		}
		_, j = job(srv)
	}
	if j.End.Before(j.Start) {
		t.Fatalf("ended job: %+v", j)
	}
	// The tick after its end carries no job series: they are marked stale
	// then, so queries stop showing the job at once (not 5 minutes later).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		send(1, false)
		resp, err := http.Get(srv + "/api/v1/query?query=" + url.QueryEscape(`vigil_job_cpus{jobid="4242"} or vigil_job_running{jobid="4242"}`))
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Data struct{ Result []json.RawMessage }
		}
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if len(v.Data.Result) == 0 {
			break
		}
		if time.Now().After(deadline) {
			r2, _ := http.Get(srv + "/api/v1/query?query=" + url.QueryEscape(`{jobid="4242"}[30s]`))
			b, _ := io.ReadAll(r2.Body)
			t.Logf("raw: %s", b)
			t.Fatalf("job 4242's series still answer 10 s after its end: %s", v.Data.Result)
		}
	}
	resp, err := http.Get(srv + "/api/v1/jobs?state=ended")
	if err != nil {
		t.Fatal(err)
	}
	var l struct{ Data []jobs.Job }
	json.NewDecoder(resp.Body).Decode(&l)
	resp.Body.Close()
	if len(l.Data) != 1 || l.Data[0].ID != "4242" {
		t.Fatalf("list of ended jobs: %+v", l.Data)
	}
	// At its end the job's figures are computed from the store and kept in
	// the index, and its report is served.
	for deadline := time.Now().Add(20 * time.Second); j.Summary == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("job 4242 has no summary 20 s after its end: %+v", j)
		}
		_, j = job(srv)
	}
	if e := j.Summary.CPUEfficiency; e < 0.35 || e > 0.65 {
		t.Errorf("summary CPU efficiency %.3f, want about 0.5 (2 of 4 CPUs busy)", e)
	}
	resp, err = http.Get(srv + "/api/v1/jobs/4242/report")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Status string
		Data   struct {
			Job     jobs.Job
			Summary jobs.Summary
			Source  string
		}
	}
	json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || rep.Data.Job.ID != "4242" || rep.Data.Source == "none" {
		t.Fatalf("report: %d %+v", resp.StatusCode, rep)
	}
	if resp, err = http.Get(srv + "/api/v1/jobs/999/report"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("report of an unknown job: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}
