package jobs

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func newManager(t *testing.T, o Options) *Manager {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// schema is a node's series: a cpu one and the jobs' running series.
func schema(ids ...string) []*metric.Desc {
	d := []*metric.Desc{metric.NewDesc("node_load1", "", metric.Gauge)}
	for _, id := range ids {
		d = append(d, metric.NewDesc("vigil_job_running", "", metric.Gauge, "jobid", id),
			metric.NewDesc("vigil_job_cpus", "", metric.Gauge, "jobid", id))
	}
	return d
}

func values(descs []*metric.Desc, running float64) []float64 {
	v := make([]float64, len(descs))
	for i, d := range descs {
		v[i] = 1
		if d.Name == "vigil_job_running" {
			v[i] = running
		}
	}
	return v
}

// TestTapJobLifecycle feeds ticks as ingest would: job 42 runs on cn1
// and cn2, ends on cn1 with running 0 and falls silent on cn2; job 43
// starts on cn1 in a new schema.
func TestTapJobLifecycle(t *testing.T) {
	var ended []string
	m := newManager(t, Options{OnEnd: func(j *Job) { ended = append(ended, j.ID) }})
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	d1 := schema("42")
	d2 := schema("42")
	m.Schema("cn1", d1)
	m.Schema("cn2", d2)
	m.Tick("cn1", t0, d1, values(d1, 1))
	m.Tick("cn2", t0.Add(time.Second), d2, values(d2, 1))
	m.sweep(time.Now(), true)
	j, err := m.Index().Get("42")
	if err != nil || j == nil {
		t.Fatalf("job 42 not indexed after a sweep: %v", err)
	}
	if j.State != StateRunning || !j.Start.Equal(t0) || !reflect.DeepEqual(j.Nodes, []string{"cn1", "cn2"}) {
		t.Fatalf("job 42 = %+v, want running on cn1, cn2 since %v", j, t0)
	}
	// cn1: the job ends (running 0), then a new schema with job 43.
	m.Tick("cn1", t0.Add(5*time.Second), d1, values(d1, 0))
	d1b := schema("43")
	m.Schema("cn1", d1b)
	m.Tick("cn1", t0.Add(6*time.Second), d1b, values(d1b, 1))
	m.Tick("cn2", t0.Add(6*time.Second), d2, values(d2, 1))
	m.sweep(time.Now(), true)
	if j, _ := m.Index().Get("42"); j.State != StateRunning || !j.End.IsZero() {
		t.Fatalf("job 42 ended while cn2 still runs it: %+v", j)
	}
	if j, _ := m.Index().Get("43"); j == nil || j.State != StateRunning || !j.Start.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("job 43 after its first tick: %+v", j)
	}
	// cn2 falls silent: 3 intervals later the job is over.
	m.sweep(time.Now().Add(2*time.Second), true)
	if j, _ := m.Index().Get("42"); j.State != StateRunning {
		t.Fatalf("job 42 ended after 2 s of silence: %+v", j)
	}
	m.Tick("cn1", t0.Add(7*time.Second), d1b, values(d1b, 1))
	m.sweep(time.Now().Add(4*time.Second), true) // both silent by then
	j, _ = m.Index().Get("42")
	if j.State != StateEnded || !j.End.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("job 42 after its nodes went quiet = %+v, want ended at its last tick %v", j, t0.Add(6*time.Second))
	}
	if j, _ := m.Index().Get("43"); j.State != StateEnded || !j.End.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("job 43 after its node went quiet = %+v", j)
	}
	slices.Sort(ended)
	if !reflect.DeepEqual(ended, []string{"42", "43"}) {
		t.Fatalf("OnEnd saw %v, want [42 43]", ended)
	}
	// The stored job survives a restart.
	dir := m.Index().dir
	m.Close()
	x := openT(t, dir)
	if got, _ := x.Get("42"); !reflect.DeepEqual(got, j) {
		t.Fatalf("after reopening: %+v, want %+v", got, j)
	}
}

// TestTapCheapWithoutJobs: a tick without job series touches nothing
// but the cache, and a changed schema of the same length is not mistaken
// for the cached one.
func TestTapSchemaChangeSameLength(t *testing.T) {
	m := newManager(t, Options{})
	t0 := time.Now()
	plain := schema()
	m.Tick("cn1", t0, plain, values(plain, 1))
	if len(m.live) != 0 {
		t.Fatal("a tick without jobs made a job")
	}
	a, b := schema("1"), schema("2")
	m.Tick("cn1", t0, a, values(a, 1))
	// Reuse a's slice for b's descriptors without a Schema call (as a
	// decoder reusing its slice would, were Schema not called).
	copy(a, b)
	m.Tick("cn1", t0, a, values(a, 1))
	if m.live["2"] == nil {
		t.Fatal("job 2 not seen: the stale cache was used")
	}
	allocs := testing.AllocsPerRun(100, func() { m.Tick("cn1", t0, plain, values(plain, 1)) })
	if allocs > 1 { // values() itself allocates one slice
		t.Fatalf("a tick without jobs allocates %v times", allocs)
	}
}

func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSlurmPoller runs fake squeue and scontrol (what Slurm 22.05
// printed): the job the nodes run gets its user and partition, and once
// the nodes end it and squeue forgets it, scontrol's final word.
func TestSlurmPoller(t *testing.T) {
	dir := t.TempDir()
	running, _ := filepath.Abs("testdata/squeue-22.05-running.json")
	sc, _ := filepath.Abs("testdata/scontrol-22.05-completed.txt")
	state := filepath.Join(dir, "state")
	os.WriteFile(state, []byte("running"), 0o644)
	squeue := writeScript(t, dir, "squeue", `if [ "$(cat `+state+`)" = running ]; then cat `+running+`; else echo '{"meta":{},"errors":[],"jobs":[]}'; fi`+"\n")
	writeScript(t, dir, "scontrol", `[ "$4" = 1 ] && exec cat `+sc+"\necho 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n")
	reg := prometheus.NewRegistry()
	m := newManager(t, Options{Slurm: &SlurmOptions{Squeue: squeue, Every: 50 * time.Millisecond}, Registerer: reg})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	d := schema("1")
	m.Tick("vnode", time.Now(), d, values(d, 1))
	waitJob(t, m, "1", func(j *Job) bool {
		return j.User == "root" && j.Partition == "test" && j.State == StateRunning && len(j.Nodes) == 1 && j.Nodes[0] == "vnode"
	})
	j, _ := m.Index().Get("1")
	if j.Name != "wrap" || j.CPUs != 1 || j.MemBytes != 100<<20 || !reflect.DeepEqual(j.Nodes, []string{"vnode"}) || j.Submit.IsZero() {
		t.Fatalf("job 1 from squeue: %+v", j)
	}
	os.WriteFile(state, []byte("gone"), 0o644)
	m.Tick("vnode", time.Now(), d, values(d, 0))
	j = waitJob(t, m, "1", func(j *Job) bool { return j.State == StateCompleted })
	want := time.Date(2026, 11, 25, 16, 46, 13, 0, time.Local)
	if !j.End.Equal(want) || j.ExitCode != 0 {
		t.Fatalf("job 1 after scontrol: %+v, want completed at %v", j, want)
	}
	if n := testutil.ToFloat64(m.m.schedErrorsC); n != 0 {
		t.Fatalf("%v scheduler errors", n)
	}
}

// TestSlurmDown: squeue missing, hanging or talking nonsense is counted,
// and the nodes' word still makes the index.
func TestSlurmDown(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, squeue string }{
		{"missing", filepath.Join(dir, "nonexistent")},
		{"hangs", writeScript(t, dir, "hang", "exec sleep 30\n")},
		{"garbage", writeScript(t, dir, "garbage", "echo '{\"jobs\": [1, 2'\n")},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t, Options{Slurm: &SlurmOptions{Squeue: c.squeue, Every: 50 * time.Millisecond, Timeout: 200 * time.Millisecond}})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { m.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			d := schema("7")
			start := time.Now()
			m.Tick("cn1", time.Now(), d, values(d, 1))
			if time.Since(start) > 50*time.Millisecond {
				t.Fatal("a tick waited for Slurm")
			}
			waitJob(t, m, "7", func(j *Job) bool { return j.State == StateRunning })
			deadline := time.Now().Add(10 * time.Second)
			for testutil.ToFloat64(m.m.schedErrorsC) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no scheduler error counted")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func waitJob(t *testing.T, m *Manager, id string, ok func(*Job) bool) *Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := m.Index().Get(id)
		if err != nil {
			t.Fatal(err)
		}
		if j != nil && ok(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %+v after 10 s", id, j)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestParseScontrol(t *testing.T) {
	b, err := os.ReadFile("testdata/scontrol-22.05-completed.txt")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseScontrol(b)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != "1" || s.User != "root" || s.Account != "" || s.Partition != "test" || s.State != StateCompleted ||
		s.CPUs != 1 || s.MemBytes != 100<<20 || s.TimeLimit != 0 || !s.HasExit || len(s.Nodes) != 1 || !strings.HasPrefix(s.Nodes[0], "v") {
		t.Fatalf("parsed %+v", s)
	}
	if _, err := parseScontrol([]byte("slurm_load_jobs error: Invalid job id specified")); err == nil {
		t.Fatal("an error message parsed as a job")
	}
}

func TestSlurmFields(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"UNLIMITED": 0, "30": 30 * time.Minute, "10:00": 10 * time.Minute, "01:02:03": time.Hour + 2*time.Minute + 3*time.Second,
		"2-00:00:00": 48 * time.Hour, "1-12": 36 * time.Hour, "1-00:30": 24*time.Hour + 30*time.Minute, "x:1": 0,
	} {
		if got := parseSlurmDuration(in); got != want {
			t.Errorf("parseSlurmDuration(%q) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"cn1": "cn1", "cn[01-03,7]": "cn01 cn02 cn03 cn7", "a[1-2]-ib[0-1],b": "a1-ib0 a1-ib1 a2-ib0 a2-ib1 b", "": "",
	} {
		got, err := expandHostlist(in, 100)
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("expandHostlist(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"cn[1-100000]", "cn[3-1]", "cn[1-", "cn[x]"} {
		if got, err := expandHostlist(bad, 1000); err == nil {
			t.Errorf("expandHostlist(%q) = %d names, want an error", bad, len(got))
		}
	}
	if waitStatus(256) != 1 || waitStatus(9) != 137 || waitStatus(0) != 0 {
		t.Error("waitStatus")
	}
	if slurmState("CANCELLED by 0") != StateCancelled || slurmState("OUT_OF_MEMORY") != StateOOM || slurmState("NODE_FAIL") != StateNodeFail {
		t.Error("slurmState")
	}
}

// TestRestoreRunning: a job the index has running when the server starts
// again is ended if no node reports it within 3 intervals, and stays
// running on the nodes that do.
func TestRestoreRunning(t *testing.T) {
	dir := t.TempDir()
	x := openT(t, dir)
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	for _, id := range []string{"1", "2"} {
		if err := x.Upsert(&Job{ID: id, Nodes: []string{"cn" + id}, Start: start, State: StateRunning}); err != nil {
			t.Fatal(err)
		}
	}
	x.Close()
	m := newManager(t, Options{Dir: dir})
	// 5 s pass: job 2 is heard again, job 1 not.
	m.live["1"].nodes["cn1"].heard = time.Now().Add(-5 * time.Second)
	d := schema("2")
	m.Tick("cn2", time.Now(), d, values(d, 1))
	m.sweep(time.Now(), true)
	j1, _ := m.Index().Get("1")
	j2, _ := m.Index().Get("2")
	if j1.State != StateEnded || j1.End.Before(start) {
		t.Errorf("job 1, silent since the restart: %+v, want ended", j1)
	}
	if j2.State != StateRunning || !j2.Start.Equal(start) {
		t.Errorf("job 2, still reported: %+v, want running since %v", j2, start)
	}
}
