package report

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

const mib = 1 << 20

var t0 = time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)

// wasteJob is a 4-node hour-long job asking 64 GiB and 64 cores: three
// nodes keep 12 of their 16 cores busy, cn4 drops to 6 after 20 minutes
// (a straggler), every node holds 768 MiB (cn2 1 GiB for one second at
// 30 minutes), reads 10 MiB/s and writes 1 MiB/s.
func wasteJob(t *testing.T) (jobs.Job, Querier) {
	st, q := newStore(t)
	nodes := nodeNames(4)
	loads := make([]nodeLoad, 4)
	for k := range loads {
		loads[k] = func(i int) (float64, float64, float64, float64) {
			cores, mem := 12.0, 768.0*mib
			if k == 3 && i > 1200 {
				cores = 6
			}
			if k == 1 && i == 1800 {
				mem = 1024 * mib
			}
			return cores, mem, 10 * mib, 1 * mib
		}
	}
	synthJob(t, st, "4242", nodes, loads, 16, 16*gib, t0, time.Hour, time.Second, 0, 0)
	job := jobs.Job{ID: "4242", User: "alice", Account: "physics", Partition: "cpu", Name: "sim",
		Nodes: nodes, CPUs: 64, MemBytes: 64 * gib, TimeLimit: jobs.Duration(2 * time.Hour),
		Start: t0, End: t0.Add(time.Hour), State: jobs.StateCompleted}
	return job, q
}

func TestReportFromStore(t *testing.T) {
	job, q := wasteJob(t)
	r, err := Build(context.Background(), q, job, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != "store" {
		t.Fatalf("source %q, want store", r.Source)
	}
	s := r.Summary
	// 3 nodes × 12 cores × 3600 s + cn4 12 × 1200 + 6 × 2400, over 64 × 3600.
	wantEff := (3*12*3600.0 + 12*1200 + 6*2400) / (64 * 3600)
	if math.Abs(s.CPUEfficiency-wantEff)/wantEff > 0.01 {
		t.Errorf("CPU efficiency %.4f, want %.4f within 1 %%", s.CPUEfficiency, wantEff)
	}
	if want := int64(3*768*mib + 1024*mib); s.MemUsedPeak != want {
		t.Errorf("memory peak %d, want %d", s.MemUsedPeak, want)
	}
	if want := float64(s.MemUsedPeak) / (64 * gib); s.MemEfficiency != want {
		t.Errorf("memory efficiency %v, want %v", s.MemEfficiency, want)
	}
	if want := int64(4 * 10 * mib * 3600); s.ReadBytes != want {
		t.Errorf("read %d, want %d", s.ReadBytes, want)
	}
	if len(s.PerNode) != 4 || s.PerNode[1].MemUsedPeak != 1024*mib || s.PerNode[0].MemUsedPeak != 768*mib {
		t.Errorf("per node: %+v", s.PerNode)
	}
	if e := s.PerNode[3].CPUEfficiency; math.Abs(e-(12*1200+6*2400)/(16*3600.0)) > 0.005 {
		t.Errorf("cn4 CPU efficiency %.4f", e)
	}
	if len(r.Stragglers) != 1 || r.Stragglers[0].Node != "cn4" || r.Stragglers[0].Metric != MetricCPU {
		t.Fatalf("stragglers %+v, want cn4 on cpu", r.Stragglers)
	}
	if d := r.Stragglers[0].Deficit; d < 0.45 || d > 0.55 {
		t.Errorf("cn4 deficit %.3f, want about 0.5", d)
	}
	if f := r.Stragglers[0].Fraction; f < 0.6 || f > 0.7 {
		t.Errorf("cn4 flagged for %.2f of the run, want about 2/3", f)
	}
	if len(s.Stragglers) != 1 || s.Stragglers[0] != "cn4" {
		t.Errorf("summary stragglers %v", s.Stragglers)
	}
	notes := strings.Join(s.Notes, "\n")
	for _, want := range []string{
		"used 5 % of the 64 GiB of memory asked: ask for 6 GiB next time (1.5 GiB per node)",
		"cn4 ran 50 % below its job peers' median CPU",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	cpu := r.Series[MetricCPU]
	if cpu == nil || len(cpu.Median) == 0 || len(cpu.Median) > MaxPoints || len(cpu.Nodes) != 4 {
		t.Fatalf("cpu series: %+v", cpu)
	}
	mid := cpu.Median[len(cpu.Median)/2]
	if math.Abs(mid[1]-12) > 0.1 {
		t.Errorf("median CPU mid-run %v, want 12 cores", mid[1])
	}
	if p10 := cpu.P10[len(cpu.P10)/2][1]; p10 >= 12 || p10 < 6 {
		t.Errorf("p10 mid-run %v, want between cn4's 6 and the others' 12", p10)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "testdata/report.txt", buf.Bytes())
	if _, err := json.Marshal(r); err != nil {
		t.Fatalf("report does not encode: %v", err)
	}
}

func TestNoFalseStraggler(t *testing.T) {
	st, q := newStore(t)
	nodes := nodeNames(8)
	loads := make([]nodeLoad, len(nodes))
	for k := range loads {
		loads[k] = func(i int) (float64, float64, float64, float64) {
			// Each node wobbles ±10 % out of phase with the others, and
			// every node pauses together for a minute each 10 minutes.
			cores := 16 * (1 + 0.1*math.Sin(float64(i)/37+float64(k)))
			if i%600 < 60 {
				cores = 0.01
			}
			return cores, 2 * gib, 50 * mib * (1 + 0.1*math.Cos(float64(i)/53+float64(k))), 0
		}
	}
	synthJob(t, st, "77", nodes, loads, 16, 0, t0, 30*time.Minute, time.Second, 0, 0)
	job := jobs.Job{ID: "77", Nodes: nodes, CPUs: 128, Start: t0, End: t0.Add(30 * time.Minute), State: jobs.StateCompleted}
	r, err := Build(context.Background(), q, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Stragglers) != 0 || len(r.Summary.Stragglers) != 0 {
		t.Errorf("uniform job flagged stragglers: %+v", r.Stragglers)
	}
	for _, n := range r.Summary.Notes {
		if strings.Contains(n, "straggler") || strings.Contains(n, "memory asked") {
			t.Errorf("unexpected note %q", n)
		}
	}
	if r.Summary.CPUEfficiency < 0.8 || r.Summary.CPUEfficiency > 0.95 {
		t.Errorf("CPU efficiency %.3f, want about 0.9", r.Summary.CPUEfficiency)
	}
}

func TestOOMAndLowCPUNotes(t *testing.T) {
	st, q := newStore(t)
	nodes := []string{"gpu7"}
	loads := []nodeLoad{func(int) (float64, float64, float64, float64) { return 1, 7.8 * gib, 0, 200 * mib }}
	synthJob(t, st, "9", nodes, loads, 32, 8*gib, t0, 10*time.Minute, time.Second, 0, 300)
	job := jobs.Job{ID: "9", Nodes: nodes, Start: t0, End: t0.Add(10 * time.Minute), State: jobs.StateOOM}
	r, err := Build(context.Background(), q, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.OOMKills != 1 || r.CPUs != 32 || r.MemLimit != 8*gib {
		t.Errorf("oom %d, cpus %d, limit %d", r.OOMKills, r.CPUs, r.MemLimit)
	}
	notes := strings.Join(r.Summary.Notes, "\n")
	for _, want := range []string{
		"memory peaked at 97 % of the 8 GiB asked: ask for 12 GiB",
		"1 process(es) killed for lack of memory (OOM) on gpu7",
		"the job looks serial",
		"I/O heavy: read 0 B and wrote 117 GiB",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

func TestReportFromSummary(t *testing.T) {
	_, q := newStore(t)
	sum := &jobs.Summary{CPUEfficiency: 0.42, MemUsedPeak: 3 * gib, MemEfficiency: 3.0 / 64,
		PerNode:    []jobs.NodeSummary{{Node: "cn1", CPUEfficiency: 0.5, MemUsedPeak: 2 * gib}, {Node: "cn2", CPUEfficiency: 0.34, MemUsedPeak: gib}},
		Stragglers: []string{"cn2"}, Notes: []string{"kept note"}}
	job := jobs.Job{ID: "1", User: "bob", Nodes: []string{"cn1", "cn2"}, CPUs: 8, MemBytes: 64 * gib,
		Start: t0, End: t0.Add(time.Hour), State: jobs.StateCompleted, Summary: sum}
	r, err := Build(context.Background(), q, job, t0.Add(400*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != "summary" || r.Summary.CPUEfficiency != 0.42 || len(r.Series) != 0 {
		t.Fatalf("got source %q, summary %+v, %d series", r.Source, r.Summary, len(r.Series))
	}
	if len(r.Stragglers) != 1 || r.Stragglers[0].Node != "cn2" {
		t.Errorf("stragglers %+v", r.Stragglers)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "testdata/summary.txt", buf.Bytes())
}

func TestHandler(t *testing.T) {
	job, q := wasteJob(t)
	h := Handler(func(id string) (jobs.Job, bool) { return job, id == job.ID }, q)
	mux := http.NewServeMux()
	mux.Handle("GET /api/v1/jobs/{id}/report", h)
	for _, tc := range []struct {
		path, status, errType string
		code                  int
	}{
		{"/api/v1/jobs/4242/report", "success", "", 200},
		{"/api/v1/jobs/4243/report", "error", "not_found", 404},
		{"/api/v1/jobs/" + strings.Repeat("9", 100) + "/report", "error", "bad_data", 400},
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		var env struct {
			Status    string  `json:"status"`
			ErrorType string  `json:"errorType"`
			Data      *Report `json:"data"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatalf("%s: %v: %s", tc.path, err, rec.Body)
		}
		if rec.Code != tc.code || env.Status != tc.status || env.ErrorType != tc.errType {
			t.Errorf("%s: %d %s %s, want %d %s %s", tc.path, rec.Code, env.Status, env.ErrorType, tc.code, tc.status, tc.errType)
		}
		if tc.code == 200 && (env.Data == nil || env.Data.Summary.MemUsedPeak != 3*768*mib+1024*mib || len(env.Data.Series[MetricMemory].Nodes) != 4) {
			t.Errorf("report answer lacks figures")
		}
	}
}

func TestSuggestMem(t *testing.T) {
	for _, tc := range []struct{ peak, want int64 }{
		{100 * mib, 256 * mib}, {700 * mib, 1024 * mib}, {3 * gib, 4 * gib}, {3*gib + 300*mib, 6 * gib}, {50 * gib, 64 * gib},
	} {
		if got := suggestMem(tc.peak); got != tc.want {
			t.Errorf("suggestMem(%s) = %s, want %s", size(tc.peak), size(got), size(tc.want))
		}
	}
}

// TestReportFromRollups checks that a long job read through the server's
// rollups (series from per-minute maxima up to the watermark, raw after
// it) gives the raw figures and the same straggler.
func TestReportFromRollups(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(store.Options{Dir: dir, Job: "node", MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ru, err := store.OpenRollup(st, store.RollupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ru.Close()
	nodes := nodeNames(4)
	dur := 10 * time.Hour
	loads := make([]nodeLoad, 4)
	for k := range loads {
		loads[k] = func(i int) (float64, float64, float64, float64) {
			cores, mem := 8.0, 2.0*gib
			if k == 2 && i > 4*3600 {
				cores = 3
			}
			if k == 0 && i == 5*3600+17 {
				mem = 5 * gib
			}
			return cores, mem, 0, 0
		}
	}
	synthJob(t, st, "31", nodes, loads, 8, 0, t0, dur, time.Second, 0, 0)
	// Roll up all but the last 2 hours: both parts are read.
	if _, err := ru.Step(context.Background(), t0.Add(8*time.Hour)); err != nil {
		t.Fatal(err)
	}
	job := jobs.Job{ID: "31", Nodes: nodes, CPUs: 32, MemBytes: 64 * gib, Start: t0, End: t0.Add(dur), State: jobs.StateCompleted}
	api := query.New(ru.Queryable(), query.Options{})
	raw, err := Build(context.Background(), APIQuerier{API: api}, job, t0.Add(dur+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rolled, err := Build(context.Background(), APIQuerier{API: api, Watermark: ru.Watermark}, job, t0.Add(dur+time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rolled.Step != jobs.Duration(2*time.Minute) || raw.Step != jobs.Duration(72*time.Second) {
		t.Errorf("steps %v (rollups) and %v (raw), want 2m and 72s", time.Duration(rolled.Step), time.Duration(raw.Step))
	}
	want := (3*8*10.0 + 3*6 + 8*4) / (32 * 10)
	for name, r := range map[string]*Report{"raw": raw, "rollups": rolled} {
		s := r.Summary
		if math.Abs(s.CPUEfficiency-want)/want > 0.01 {
			t.Errorf("%s: CPU efficiency %.4f, want %.4f", name, s.CPUEfficiency, want)
		}
		if s.MemUsedPeak != 11*gib || s.PerNode[0].MemUsedPeak != 5*gib {
			t.Errorf("%s: memory peak %s (cn1 %s), want 11 GiB (5 GiB)", name, size(s.MemUsedPeak), size(s.PerNode[0].MemUsedPeak))
		}
		if len(r.Stragglers) != 1 || r.Stragglers[0].Node != "cn3" || math.Abs(r.Stragglers[0].Deficit-5.0/8) > 0.03 {
			t.Errorf("%s: stragglers %+v, want cn3 about 62 %% below", name, r.Stragglers)
		}
		cpu := r.Series[MetricCPU]
		steps := int(dur / time.Duration(r.Step))
		if n := len(cpu.Nodes["cn1"]); n < steps-2 || n > steps || n > MaxPoints {
			t.Errorf("%s: %d CPU points for cn1, want about %d", name, n, steps)
		}
	}
	// The seam: points stay in time order, one per step.
	pts := rolled.Series[MetricCPU].Nodes["cn1"]
	for i := 1; i < len(pts); i++ {
		if pts[i][0]-pts[i-1][0] != 120 {
			t.Fatalf("cn1 points %d and %d are %v s apart", i-1, i, pts[i][0]-pts[i-1][0])
		}
	}
}

// TestReportNoData: a job with neither samples nor a summary, and ids that
// would break a naively built selector, still give a report.
func TestReportNoData(t *testing.T) {
	_, q := newStore(t)
	for _, id := range []string{"12345", `7"} or vector(1) #`, "a\\b\n"} {
		job := jobs.Job{ID: id, Start: t0, End: t0.Add(time.Hour), State: jobs.StateEnded}
		r, err := Build(context.Background(), q, job, t0.Add(2*time.Hour))
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if r.Source != "none" || len(r.Series) != 0 || len(r.Summary.Notes) != 1 || !strings.Contains(r.Summary.Notes[0], "no samples") {
			t.Errorf("%q: source %q, %d series, notes %q", id, r.Source, len(r.Series), r.Summary.Notes)
		}
		var buf bytes.Buffer
		if err := WriteText(&buf, r); err != nil || !strings.Contains(buf.String(), "Figures: none stored") {
			t.Errorf("%q: text %v:\n%s", id, err, buf.String())
		}
	}
}

// TestCPUTail checks that a short job's CPU efficiency counts the end of
// its run after the nodes' last tick (the cgroup goes before the next one)
// at the node's rate, and that a node silent for long is not extrapolated.
func TestCPUTail(t *testing.T) {
	busy := []nodeLoad{func(int) (float64, float64, float64, float64) { return 1, 200 * mib, 0, 0 }}
	for _, c := range []struct {
		name    string
		after   time.Duration // from the last tick to the job's end
		wantEff float64
	}{
		{"last tick 0.9 s before the end", 900 * time.Millisecond, 1},
		{"node silent for 5 minutes", 5 * time.Minute, 10.0 / (10 + 300)},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, q := newStore(t)
			synthJob(t, st, "77", nodeNames(1), busy, 1, gib, t0, 10*time.Second, time.Second, 0, 0)
			job := jobs.Job{ID: "77", Nodes: nodeNames(1), CPUs: 1, Start: t0, End: t0.Add(10*time.Second + c.after), State: jobs.StateCompleted}
			r, err := Build(context.Background(), q, job, t0.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if r.Source != "store" || math.Abs(r.Summary.CPUEfficiency-c.wantEff) > 0.01*c.wantEff {
				t.Errorf("source %s, CPU efficiency %.4f, want %.4f", r.Source, r.Summary.CPUEfficiency, c.wantEff)
			}
			if len(r.Summary.PerNode) != 1 || math.Abs(r.Summary.PerNode[0].CPUEfficiency-c.wantEff) > 0.01*c.wantEff {
				t.Errorf("per node %+v, want CPU efficiency %.4f", r.Summary.PerNode, c.wantEff)
			}
		})
	}
}

// fromKeptSummary stores r's summary with its job in a jobs index on disk,
// reads it back and builds the job's report again from it alone (an empty
// store: the raw samples expired).
func fromKeptSummary(t *testing.T, r *Report) *Report {
	t.Helper()
	dir := t.TempDir()
	x, err := jobs.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := r.Job
	sum := r.Summary
	job.Summary = &sum
	if err := x.Upsert(&job); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = jobs.Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	kept, err := x.Get(job.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, empty := newStore(t)
	again, err := Build(context.Background(), empty, *kept, t0.Add(400*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again.Source != "summary" {
		t.Fatalf("source %q, want summary", again.Source)
	}
	return again
}

// sectionText is the text report's block titled title.
func sectionText(t *testing.T, r *Report, title string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteText(&buf, r); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	i := strings.Index(text, title+"\n")
	if i < 0 {
		t.Fatalf("no %s block in\n%s", title, text)
	}
	block, _, _ := strings.Cut(text[i:], "Notes")
	return block
}
