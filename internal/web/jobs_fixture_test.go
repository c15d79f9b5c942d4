package web

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fakeJobs serves api/v1/jobs, api/v1/jobs/{id} and api/v1/jobs/{id}/report
// in the shape of the issue 14 contract (internal/jobs), for the browser
// tests of the Jobs view, the job page, the heatmap highlight and the node
// view's job list. Times are relative to its creation, so "since" and the
// node view's last 24 h see them.
type fakeJobs struct {
	now  time.Time
	jobs []map[string]any // newest first, as the index answers
}

// The job with the straggler: 8 nodes, cn00013 runs 40 % below its peers.
const (
	fixtureStragglerJob  = "1002"
	fixtureStragglerNode = "cn00013"
)

func fixtureNodes(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("cn%05d", i))
	}
	return out
}

func newFakeJobs(now time.Time) *fakeJobs {
	ts := func(d time.Duration) string { return now.Add(-d).UTC().Format(time.RFC3339) }
	const gib = int64(1) << 30
	perNode := func(nodes []string, eff float64, peak int64, slow string) []map[string]any {
		var out []map[string]any
		for _, n := range nodes {
			e := eff
			if n == slow {
				e *= 0.6
			}
			out = append(out, map[string]any{"node": n, "cpu_efficiency": e, "mem_used_peak": peak / int64(len(nodes)),
				"read_bytes": 3 * gib, "write_bytes": gib})
		}
		return out
	}
	f := &fakeJobs{now: now}
	f.jobs = []map[string]any{
		{"id": "1005", "user": "dave", "account": "bio", "partition": "cpu", "name": "assemble", "cpus": 32,
			"mem_bytes": 64 * gib, "time_limit": 7200, "submit": ts(5 * time.Minute), "state": "pending"},
		{"id": "1001", "user": "alice", "account": "physics", "partition": "cpu", "name": "lattice-qcd",
			"nodes": fixtureNodes(1, 4), "cpus": 128, "mem_bytes": 256 * gib, "time_limit": 14400,
			"submit": ts(70 * time.Minute), "start": ts(time.Hour), "state": "running"},
		{"id": "1004_7", "user": "carol", "account": "cs", "partition": "debug", "name": "sweep",
			"nodes": []string{"cn00020"}, "cpus": 4, "time_limit": 1800,
			"submit": ts(4 * time.Hour), "start": ts(4 * time.Hour), "end": ts(230 * time.Minute), "state": "failed", "exit_code": 1,
			"summary": map[string]any{"cpu_efficiency": 0.12, "mem_used_peak_bytes": 3 * gib, "mem_efficiency": 0,
				"read_bytes": 0, "write_bytes": 0, "nodes": perNode([]string{"cn00020"}, 0.12, 3*gib, "")}},
		{"id": fixtureStragglerJob, "user": "bob", "account": "chem", "partition": "gpu", "name": "md-run",
			"nodes": fixtureNodes(10, 17), "cpus": 256, "mem_bytes": 512 * gib, "gpus": 8, "time_limit": 21600,
			"submit": ts(6 * time.Hour), "start": ts(5 * time.Hour), "end": ts(2 * time.Hour), "state": "completed",
			"summary": map[string]any{"cpu_efficiency": 0.71, "mem_used_peak_bytes": 31 * gib, "mem_efficiency": 31.0 / 512,
				"read_bytes": 24 * gib, "write_bytes": 8 * gib, "nodes": perNode(fixtureNodes(10, 17), 0.74, 31*gib, fixtureStragglerNode),
				"stragglers": []string{fixtureStragglerNode},
				"notes": []string{
					"used 6 % of the 512 GiB asked: ask for 40 GiB next time",
					fixtureStragglerNode + " ran 40 % below its job peers' median CPU: a straggler",
				}}},
		{"id": "1003", "user": "alice", "account": "physics", "partition": "cpu", "name": "old-run",
			"nodes": []string{"cn00002"}, "cpus": 32, "mem_bytes": 64 * gib, "time_limit": 3600,
			"submit": ts(20 * time.Hour), "start": ts(20 * time.Hour), "end": ts(19 * time.Hour), "state": "completed",
			"summary": map[string]any{"cpu_efficiency": 0.92, "mem_used_peak_bytes": 35 * gib, "mem_efficiency": 35.0 / 64,
				"read_bytes": gib, "write_bytes": gib, "nodes": perNode([]string{"cn00002"}, 0.92, 35*gib, ""),
				"notes": []string{"the raw samples of this job have expired"}}},
	}
	return f
}

func (f *fakeJobs) get(id string) map[string]any {
	for _, j := range f.jobs {
		if j["id"] == id {
			return j
		}
	}
	return nil
}

func jobsJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, code int, typ, msg string) {
	jobsJSON(w, code, map[string]string{"status": "error", "errorType": typ, "error": msg})
}

func (f *fakeJobs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/api/v1/jobs")
	if rest == "" || rest == "/" {
		f.list(w, r)
		return
	}
	id, report := strings.CutSuffix(strings.TrimPrefix(rest, "/"), "/report")
	j := f.get(id)
	if j == nil || strings.Contains(id, "/") {
		apiError(w, http.StatusNotFound, "not_found", fmt.Sprintf("job %q not found", id))
		return
	}
	if !report {
		jobsJSON(w, http.StatusOK, map[string]any{"status": "success", "data": j})
		return
	}
	data := map[string]any{"job": j, "summary": j["summary"], "series": f.series(j)}
	if id == "1002" {
		data["io"] = fixtureIO
	}
	jobsJSON(w, http.StatusOK, map[string]any{"status": "success", "data": data})
}

// list applies the contract's filters (and node=, which the view needs).
func (f *fakeJobs) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 500
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			apiError(w, http.StatusBadRequest, "bad_data", "limit: want a positive integer, got "+strconv.Quote(s))
			return
		}
		limit = n
	}
	var since time.Duration
	if s := q.Get("since"); s != "" {
		d, err := time.ParseDuration(strings.Replace(s, "d", "h", 1))
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_data", "since: bad duration "+strconv.Quote(s))
			return
		}
		if strings.HasSuffix(s, "d") {
			d *= 24
		}
		since = d
	}
	out := []map[string]any{}
	for _, j := range f.jobs {
		str := func(k string) string { s, _ := j[k].(string); return s }
		if (q.Get("user") != "" && str("user") != q.Get("user")) || (q.Get("state") != "" && str("state") != q.Get("state")) ||
			(q.Get("partition") != "" && str("partition") != q.Get("partition")) {
			continue
		}
		if n := q.Get("node"); n != "" {
			nodes, _ := j["nodes"].([]string)
			if !slices.Contains(nodes, n) {
				continue
			}
		}
		if since > 0 && str("end") != "" {
			end, _ := time.Parse(time.RFC3339, str("end"))
			if end.Before(f.now.Add(-since)) {
				continue
			}
		}
		if len(out) < limit {
			out = append(out, j)
		}
	}
	jobsJSON(w, http.StatusOK, map[string]any{"status": "success", "data": out})
}

// series is the report's per-metric median, p10, p90 and node lines at a
// 60 s step over the job's life; the straggler node runs 40 % below. Jobs
// whose raw data "expired" (1003) and pending ones have none.
func (f *fakeJobs) series(j map[string]any) map[string]any {
	out := map[string]any{}
	start, err := time.Parse(time.RFC3339, fmt.Sprint(j["start"]))
	if err != nil || j["id"] == "1003" {
		return out
	}
	end := f.now
	if e, err := time.Parse(time.RFC3339, fmt.Sprint(j["end"])); err == nil {
		end = e
	}
	nodes, _ := j["nodes"].([]string)
	scale := map[string]float64{"cpu": 30, "memory": 4 << 30, "read": 2e6, "write": 7e5}
	for m, sc := range scale {
		per := map[string][][2]float64{}
		for i, n := range nodes {
			for t := start.Unix(); t <= end.Unix(); t += 60 {
				v := sc * (0.8 + 0.1*math.Sin(float64(t)/600+float64(i)) + 0.02*float64(i%3))
				if n == fixtureStragglerNode {
					v *= 0.6
				}
				per[n] = append(per[n], [2]float64{float64(t), v})
			}
		}
		var med, p10, p90 [][2]float64
		for k := range per[nodes[0]] {
			vals := make([]float64, 0, len(nodes))
			for _, n := range nodes {
				vals = append(vals, per[n][k][1])
			}
			slices.Sort(vals)
			t := per[nodes[0]][k][0]
			med = append(med, [2]float64{t, pct(vals, 0.5)})
			p10 = append(p10, [2]float64{t, pct(vals, 0.1)})
			p90 = append(p90, [2]float64{t, pct(vals, 0.9)})
		}
		out[m] = map[string]any{"median": med, "p10": p10, "p90": p90, "nodes": per}
	}
	return out
}

func pct(sorted []float64, q float64) float64 {
	pos := float64(len(sorted)-1) * q
	lo, hi := int(math.Floor(pos)), int(math.Ceil(pos))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// fixtureIO is job 1002's application I/O section: small writes to
// /scratch, 1 MiB reads from /home.
var fixtureIO = map[string]any{
	"buckets":     []string{"100", "1024", "10240", "102400", "1048576", "4194304", "10485760", "104857600", "1073741824", "+Inf"},
	"read_sizes":  []float64{0, 0, 0, 0, 12000, 0, 0, 0, 0, 0},
	"write_sizes": []float64{0, 240000, 0, 0, 0, 0, 0, 0, 0, 0},
	"sequential":  249000, "random": 3000, "read_seconds": 24, "write_seconds": 36, "meta_seconds": 60,
	"fs": []map[string]any{
		{"mountpoint": "/home", "fstype": "nfs", "read_bytes": 12582912000, "write_bytes": 0, "calls": map[string]float64{"open": 1200, "close": 1200, "read": 12000},
			"read_seconds": 24, "write_seconds": 0, "meta_seconds": 0, "sequential": 9000, "random": 3000,
			"read_sizes": []float64{0, 0, 0, 0, 12000, 0, 0, 0, 0, 0}, "write_sizes": []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"mountpoint": "/scratch", "fstype": "lustre", "read_bytes": 0, "write_bytes": 122880000, "calls": map[string]float64{"open": 2400, "close": 2400, "stat": 24000, "write": 240000},
			"read_seconds": 0, "write_seconds": 36, "meta_seconds": 60, "sequential": 240000, "random": 0,
			"read_sizes": []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "write_sizes": []float64{0, 240000, 0, 0, 0, 0, 0, 0, 0, 0}},
	},
}
