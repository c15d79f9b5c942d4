package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// statusFixture serves the issue 15 APIs the Status view and the node view
// read (api/v1/health, api/v1/alerts, api/v1/events and its stream) in the
// contract's shapes, over a fake cluster whose first node is down. What a
// server lacks is a 404, as the Prometheus API answers unknown paths.
type statusFixture struct {
	*fakeCluster
	now    time.Time
	health bool // api/v1/health; without it the plugin's series answer
	alerts bool
	events bool // api/v1/events
	stream bool // api/v1/events/stream
	// failing is the node with a failing check (by either source).
	failing string
	// extra nodes with failing checks and alerts, for the 20,000-node run.
	many bool
	// page caps the events of one answer (0: the limit asked), as a server
	// may, so that paging back is needed.
	page   int
	listed atomic.Int64 // event list requests
}

func newStatusFixture(n int) *statusFixture {
	return &statusFixture{fakeCluster: newFakeCluster(n), now: time.Now(), health: true, alerts: true, events: true, stream: true, failing: "cn00002"}
}

// Nodes: cn00001 is down (and every 97th node of a big cluster).
func (f *statusFixture) Nodes(ctx context.Context) ([]NodeInfo, error) {
	l := make([]NodeInfo, len(f.names))
	for i, n := range f.names {
		l[i] = NodeInfo{Name: n, Up: i%97 != 0}
	}
	return l, nil
}

type fixtureEvent struct {
	ID       uint64    `json:"id"`
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Node     string    `json:"node,omitempty"`
	Job      string    `json:"job,omitempty"`
	Severity string    `json:"severity"`
	Summary  string    `json:"summary"`
	Link     string    `json:"link,omitempty"`
}

// eventList is the store's content, newest first. The list grows by one
// (id 8) from the second request on, for the polling fallback.
func (f *statusFixture) eventList(second bool) []fixtureEvent {
	ago := func(m int) time.Time { return f.now.Add(-time.Duration(m) * time.Minute) }
	l := []fixtureEvent{
		{6, ago(10), "job_end", "cn00002", "1001", "info", "job 1001 ended (alice)", "#/job/1001"},
		{5, ago(20), "log_new_pattern", "cn00003", "", "warning", "new log pattern: kernel: EDAC MC0: <*> CE memory read error", "#/logs?q=pattern:42"},
		{4, ago(25), "alert_firing", "cn00001", "", "critical", "InstanceDown: cn00001 has sent nothing for 30 s", ""},
		{3, ago(30), "node_down", "cn00001", "", "critical", "cn00001 stopped reporting", "#/node/cn00001"},
		{2, ago(40), "health_fail", "cn00002", "", "critical", "gpu_ecc: 3 uncorrectable ECC errors", "#/node/cn00002"},
		{1, ago(50), "job_start", "cn00002", "1001", "info", "job 1001 started (alice)", "#/job/1001"},
	}
	if second {
		l = append([]fixtureEvent{{8, ago(0), "failover", "", "", "warning", "agg-a took over rack r1 from agg-b", ""}}, l...)
	}
	return l
}

// streamed is what the stream sends once a client connects.
func (f *statusFixture) streamed() fixtureEvent {
	return fixtureEvent{7, time.Now(), "gap", "cn00003", "", "warning", "12 s of cn00003's data lost on the way", ""}
}

func (f *statusFixture) notFound(w http.ResponseWriter) {
	apiError(w, http.StatusNotFound, "not_found", "404 page not found")
}

// mux serves the dashboard, the fake query API and the fixtures.
func (f *statusFixture) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/", f.query)
	mux.HandleFunc("/api/v1/health", f.serveHealth)
	mux.HandleFunc("/api/v1/alerts", f.serveAlerts)
	mux.HandleFunc("/api/v1/events", f.serveEvents)
	mux.HandleFunc("/api/v1/events/stream", f.serveStream)
	jobs := newFakeJobs(f.now)
	mux.Handle("/api/v1/jobs", jobs)
	mux.Handle("/api/v1/jobs/", jobs)
	mux.Handle("/", New(Options{Source: f, Interval: time.Second}))
	return mux
}

// query answers the health plugin's series for the fallback, the rest
// as the fake cluster does.
func (f *statusFixture) query(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	q := r.Form.Get("query")
	if !strings.Contains(q, "vigil_health_check") {
		f.fakeCluster.ServeHTTP(w, r)
		return
	}
	var res []map[string]any
	node := ""
	if m := nodeMatcher.FindStringSubmatch(q); m != nil {
		node = m[1]
	}
	if node == "" || node == f.failing {
		lbl := map[string]string{"node": f.failing, "check": "ib_link", "job": "vigil", "instance": f.failing}
		if strings.Contains(q, "failure") {
			lbl["__name__"] = "vigil_health_check_failure"
			lbl["reason"] = "port 1 down"
		}
		res = append(res, map[string]any{"metric": lbl, "value": []any{float64(f.now.Unix()), "0"}})
	}
	jobsJSON(w, http.StatusOK, map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
}

func (f *statusFixture) serveHealth(w http.ResponseWriter, _ *http.Request) {
	if !f.health {
		f.notFound(w)
		return
	}
	nodes := map[string]any{f.failing: []map[string]string{{"check": "gpu_ecc", "reason": "3 uncorrectable ECC errors", "since": f.now.Add(-40 * time.Minute).UTC().Format(time.RFC3339)}}}
	if f.many {
		for i := 5; i < len(f.names); i += 61 {
			nodes[f.names[i]] = []map[string]string{{"check": "gpu_ecc", "reason": "ECC"}}
		}
	}
	jobsJSON(w, http.StatusOK, map[string]any{"status": "success", "data": map[string]any{"nodes": nodes}})
}

func (f *statusFixture) serveAlerts(w http.ResponseWriter, _ *http.Request) {
	if !f.alerts {
		f.notFound(w)
		return
	}
	alert := func(name, node, sev, state string, ago time.Duration, summary string) map[string]any {
		return map[string]any{"labels": map[string]string{"alertname": name, "node": node, "severity": sev},
			"annotations": map[string]string{"summary": summary}, "state": state,
			"activeAt": f.now.Add(-ago).UTC().Format(time.RFC3339Nano), "value": "0e+00"}
	}
	list := []map[string]any{
		alert("InstanceDown", "cn00001", "critical", "firing", 25*time.Minute, "cn00001 has sent nothing for 30 s"),
		alert("HighLoad", "cn00003", "warning", "pending", time.Minute, "load above 2 per core"),
	}
	if f.many {
		for i := 7; i < len(f.names); i += 43 {
			sev := []string{"warning", "critical"}[i%2]
			list = append(list, alert("HighLoad", f.names[i], sev, "firing", time.Minute, "load above 2 per core"))
		}
	}
	jobsJSON(w, http.StatusOK, map[string]any{"status": "success", "data": map[string]any{"alerts": list}})
}

// parseWhen reads since/until as the contract has them: RFC 3339, unix
// seconds or a duration before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return time.UnixMilli(int64(n * 1000)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want RFC 3339, unix seconds or a duration, got %q", s)
	}
	return now.Add(-d), nil
}

// match applies the contract's filters to one event.
func match(e fixtureEvent, q map[string][]string, now time.Time) (bool, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if k := get("kind"); k != "" && !slices.Contains(strings.Split(k, ","), e.Kind) {
		return false, nil
	}
	if s := get("severity"); s != "" && !slices.Contains(strings.Split(s, ","), e.Severity) {
		return false, nil
	}
	if n := get("node"); n != "" {
		if ok, _ := path.Match(n, e.Node); !ok {
			return false, nil
		}
	}
	if s := get("since"); s != "" {
		t, err := parseWhen(s, now)
		if err != nil {
			return false, fmt.Errorf("since: %w", err)
		}
		if e.Time.Before(t) {
			return false, nil
		}
	}
	if s := get("until"); s != "" {
		t, err := parseWhen(s, now)
		if err != nil {
			return false, fmt.Errorf("until: %w", err)
		}
		if e.Time.After(t) {
			return false, nil
		}
	}
	return true, nil
}

func (f *statusFixture) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !f.events {
		f.notFound(w)
		return
	}
	q := r.URL.Query()
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > 10000 {
			apiError(w, http.StatusBadRequest, "bad_data", "limit: want 1..10000, got "+strconv.Quote(s))
			return
		}
		limit = n
	}
	if f.page > 0 {
		limit = min(limit, f.page)
	}
	var before uint64
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_data", "before: want an event id, got "+strconv.Quote(s))
			return
		}
		before = n
	}
	out := []fixtureEvent{}
	next := ""
	for _, e := range f.eventList(f.listed.Add(1) > 1) {
		ok, err := match(e, q, time.Now())
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_data", err.Error())
			return
		}
		if !ok || (before != 0 && e.ID >= before) {
			continue
		}
		if len(out) == limit {
			next = strconv.FormatUint(out[len(out)-1].ID, 10)
			break
		}
		out = append(out, e)
	}
	jobsJSON(w, http.StatusOK, map[string]any{"status": "success", "data": map[string]any{"events": out, "next": next}})
}

// serveStream sends the streamed event (if it passes the filters) shortly
// after the client connects, then holds the stream open.
func (f *statusFixture) serveStream(w http.ResponseWriter, r *http.Request) {
	if !f.stream {
		f.notFound(w)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	fl.Flush()
	select {
	case <-r.Context().Done():
		return
	case <-time.After(300 * time.Millisecond):
	}
	if e := f.streamed(); func() bool { ok, _ := match(e, r.URL.Query(), time.Now()); return ok }() {
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "event: vigil\ndata: %s\n\n", b)
		fl.Flush()
	}
	<-r.Context().Done()
}

// TestBrowserStatus opens the Status view in Chromium over fixtures of the
// issue 15 APIs: the colours and counts of 3 nodes (down, failing check,
// ok), the active alerts, the timeline (listed, streamed, filtered), a
// click to the node view and the event annotations on its charts; then a
// server without health, alerts and event stream endpoints (the fallbacks),
// one without any (said, not an error page), and the render time of 20,000
// nodes.
func TestBrowserStatus(t *testing.T) {
	webDir := browserEnv(t)
	full := newStatusFixture(3)
	full.page = 4
	degraded := newStatusFixture(3)
	degraded.health, degraded.alerts, degraded.stream, degraded.failing = false, false, false, "cn00003"
	bare := newStatusFixture(3)
	bare.health, bare.alerts, bare.events, bare.stream = false, false, false, false
	big := newStatusFixture(20000)
	big.many = true
	var urls []string
	for _, f := range []*statusFixture{full, degraded, bare, big} {
		srv := httptest.NewServer(f.mux())
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	shots, _ := filepath.Abs("../../build/screenshots")
	runNode(t, webDir, time.Minute, "status-e2e.mjs", append(urls, shots)...)
	if full.listed.Load() == 0 || degraded.listed.Load() < 2 {
		t.Errorf("event list asked %d times (full), %d (degraded, polling): want ≥ 1 and ≥ 2", full.listed.Load(), degraded.listed.Load())
	}
}
