package jobs

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAPI(t *testing.T) {
	m := newManager(t, Options{})
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, j := range []*Job{
		{ID: "1", User: "alice", Partition: "batch", State: StateCompleted, Start: now.Add(-3 * time.Hour), End: now.Add(-2 * time.Hour)},
		{ID: "2", User: "bob\x1b[31m", Partition: "gpu", State: StateRunning, Start: now.Add(-time.Hour), Nodes: []string{"cn1"}, TimeLimit: Duration(2 * time.Hour)},
	} {
		if err := m.Index().Upsert(j); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	m.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %s is not JSON: %v", path, b, err)
		}
		return resp.StatusCode, v
	}
	ids := func(v map[string]any) string {
		var s []string
		for _, j := range v["data"].([]any) {
			s = append(s, j.(map[string]any)["id"].(string))
		}
		return strings.Join(s, ",")
	}
	for path, want := range map[string]string{
		"/api/v1/jobs": "2,1", "/api/v1/jobs?user=alice": "1", "/api/v1/jobs?state=running": "2",
		"/api/v1/jobs?state=ended&partition=batch": "1", "/api/v1/jobs?since=90m": "2", "/api/v1/jobs?limit=1": "2",
		"/api/v1/jobs?user=nobody": "",
	} {
		code, v := get(path)
		if code != 200 || v["status"] != "success" || ids(v) != want {
			t.Errorf("GET %s: %d %v, want jobs %q", path, code, v, want)
		}
	}
	code, v := get("/api/v1/jobs/2")
	d, _ := v["data"].(map[string]any)
	if code != 200 || d["user"] != "bob\x1b[31m" || d["time_limit"] != 7200.0 || d["start"] != now.Add(-time.Hour).Format(time.RFC3339Nano) || d["end"] != nil {
		t.Errorf("GET /api/v1/jobs/2: %d %v", code, v)
	}
	for path, want := range map[string]int{
		"/api/v1/jobs/3": 404, "/api/v1/jobs/abc": 400, "/api/v1/jobs?limit=0": 400, "/api/v1/jobs?limit=100001": 400,
		"/api/v1/jobs?since=-1h": 400, "/api/v1/jobs?since=soon": 400, "/api/v1/jobs?user=" + strings.Repeat("x", 300): 400,
	} {
		code, v := get(path)
		typ := map[int]string{404: "not_found", 400: "bad_data"}[want]
		if code != want || v["status"] != "error" || v["errorType"] != typ || v["error"] == "" {
			t.Errorf("GET %s: %d %v, want %d %s", path, code, v, want, typ)
		}
	}
}

func TestAPIEvent(t *testing.T) {
	off := newManager(t, Options{})
	offMux := http.NewServeMux()
	off.Register(offMux)
	rec := httptest.NewRecorder()
	offMux.ServeHTTP(rec, httptest.NewRequest("POST", "/api/v1/jobs/1/event", strings.NewReader("event=start")))
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "--job-events") {
		t.Fatalf("event with events off: %d %s", rec.Code, rec.Body.String())
	}
	m := newManager(t, Options{Events: true})
	mux := http.NewServeMux()
	m.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(id, form string) int {
		t.Helper()
		resp, err := http.Post(srv.URL+"/api/v1/jobs/"+id+"/event", "application/x-www-form-urlencoded", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for form, want := range map[string]int{
		"event=start&user=eve&nodes=cn[1-3]&time=1700000000": 200,
		"event=begin":                       400,
		"event=start&time=yesterday":        400,
		"event=start&nodes=cn[1-999999]":    400,
		"event=end&exit_code=x":             400,
		"event=start&user=a&user=b":         400,
		"event=start&cpus=-1":               400,
		"event=start&mem_bytes=1e9":         400,
		"event=start&time_limit=9999999999": 400,
		"event=end&state=running":           400,
	} {
		if got := post("77", form); got != want {
			t.Errorf("POST %q: %d, want %d", form, got, want)
		}
	}
	if got := post("7;7", "event=start"); got != 400 {
		t.Errorf("POST to a bad id: %d", got)
	}
	if got := post("78", "event=start&cpus=32&gpus=2&mem_bytes=68719476736&time_limit=3600"); got != 200 {
		t.Fatalf("start event with resources: %d", got)
	}
	if j, _ := m.Index().Get("78"); j == nil || j.CPUs != 32 || j.GPUs != 2 || j.MemBytes != 64<<30 || time.Duration(j.TimeLimit) != time.Hour {
		t.Fatalf("job 78 after its start event: %+v", j)
	}
	if got := post("78", "event=end&exit_code=0&state=timeout"); got != 200 {
		t.Fatalf("end event with a state: %d", got)
	}
	if j, _ := m.Index().Get("78"); j.State != StateTimeout {
		t.Fatalf("job 78 after an end with state=timeout: %+v", j)
	}
	j, _ := m.Index().Get("77")
	if j == nil || j.User != "eve" || len(j.Nodes) != 3 || j.State != StateRunning || j.Start.Unix() != 1700000000 {
		t.Fatalf("job 77 after its start event: %+v", j)
	}
	// Slurm's final word stands against an epilog's.
	m.Update("77", func(j *Job) { j.State = StateTimeout })
	if got := post("77", "event=end&exit_code=0:0"); got != 200 {
		t.Fatalf("end event: %d", got)
	}
	if j, _ := m.Index().Get("77"); j.State != StateTimeout {
		t.Fatalf("an epilog's end replaced Slurm's timeout: %+v", j)
	}
}
