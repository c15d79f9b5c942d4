package alerting

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/rules"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
	vtestutil "github.com/vigil-hpc/vigil/internal/testutil"
)

// env is a store with the query layer over it, as the server has.
type env struct {
	dir string
	st  *store.Store
	api *query.API
}

func newEnv(t testing.TB, dir string, qo query.Options) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := store.Open(store.Options{Dir: dir, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{dir: dir, st: st, api: query.New(st, qo)}
}

// add appends one sample per label set (name, then label pairs) at ts.
func (e *env) add(t testing.TB, ts time.Time, v float64, lsets ...[]string) {
	t.Helper()
	app := e.st.Appender(context.Background())
	for _, ls := range lsets {
		if _, err := app.Append(0, labels.FromStrings(append([]string{"__name__"}, ls...)...), ts.UnixMilli(), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
}

// sink collects events.
type sink struct {
	mu sync.Mutex
	ev []events.Event
}

func (s *sink) Emit(e events.Event) { s.mu.Lock(); s.ev = append(s.ev, e); s.mu.Unlock() }
func (s *sink) all() []events.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Event(nil), s.ev...)
}

func writeFile(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// start runs a Manager until the test ends (or stop is called).
func (e *env) start(t testing.TB, o Options) (m *Manager, stop func()) {
	t.Helper()
	o.Query, o.Appendable, o.Queryable = e.api.RuleInstant, e.st, e.st
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return m, stop
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

const testRules = `groups:
- name: test
  rules:
  - record: x:doubled
    expr: x * 2
  - alert: XHigh
    expr: x > 0
    for: 1s
    labels:
      severity: critical
    annotations:
      summary: "x is {{ $value }} on {{ $labels.node }}"
`

// TestRulesRecordFireResolve: a recording rule writes into the store, an
// alert goes pending, fires (event, API, ALERTS series) and resolves.
func TestRulesRecordFireResolve(t *testing.T) {
	e := newEnv(t, "", query.Options{})
	file := writeFile(t, t.TempDir(), "r.yml", testRules)
	e.add(t, time.Now(), 3, []string{"x", "node", "cn1", "jobid", "42"})
	var ev sink
	m, _ := e.start(t, Options{Files: []string{file}, Interval: 200 * time.Millisecond, Events: &ev})

	waitFor(t, 10*time.Second, "a firing event", func() bool { return len(ev.all()) > 0 })
	got := ev.all()[0]
	if got.Kind != events.KindAlertFiring || got.Node != "cn1" || got.Job != "42" || got.Severity != events.SeverityCritical ||
		got.Summary != "x is 3 on cn1" || got.Labels["alertname"] != "XHigh" || got.Link != "#/node/cn1" {
		t.Errorf("firing event %+v", got)
	}
	as := m.Alerts()
	if len(as) != 1 || as[0].State != rules.StateFiring || as[0].Labels.Get("node") != "cn1" {
		t.Fatalf("alerts %v", as)
	}
	for qs, want := range map[string]float64{`x:doubled{node="cn1"}`: 6, `ALERTS{alertname="XHigh",alertstate="firing",node="cn1"}`: 1} {
		waitFor(t, 5*time.Second, qs, func() bool {
			s, err := e.api.InstantSamples(context.Background(), qs, time.Now())
			return err == nil && len(s) == 1 && s[0].Value == want
		})
	}

	e.add(t, time.Now(), 0, []string{"x", "node", "cn1", "jobid", "42"})
	waitFor(t, 10*time.Second, "a resolved event", func() bool { return len(ev.all()) > 1 })
	if r := ev.all()[1]; r.Kind != events.KindAlertResolved || r.Node != "cn1" || r.Severity != events.SeverityCritical {
		t.Errorf("resolved event %+v", r)
	}
	if n := len(ev.all()); n != 2 {
		t.Errorf("%d events, want 2: %+v", n, ev.all())
	}
}

func TestSeverity(t *testing.T) {
	for in, want := range map[string]string{"critical": "critical", "PAGE": "critical", "info": "info", "warning": "warning", "": "warning", "odd": "warning"} {
		if got := severity(in); got != want {
			t.Errorf("severity(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReloadBadFileKeepsOldRules: a syntax error on reload is reported
// with file:line, the gauge goes to 0 and the old rules keep evaluating;
// a fixed file loads again.
func TestReloadBadFileKeepsOldRules(t *testing.T) {
	e := newEnv(t, "", query.Options{})
	dir := t.TempDir()
	file := writeFile(t, dir, "r.yml", testRules)
	reg := prometheus.NewRegistry()
	var logs vtestutil.SyncBuffer
	m, _ := e.start(t, Options{Files: []string{filepath.Join(dir, "*.yml")}, Interval: 100 * time.Millisecond, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	lastEval := func() time.Time {
		for _, g := range m.rules.RuleGroups() {
			return g.GetLastEvaluation()
		}
		return time.Time{}
	}
	waitFor(t, 5*time.Second, "a first evaluation", func() bool { return !lastEval().IsZero() })
	if v := testutil.ToFloat64(m.reloadOK); v != 1 {
		t.Fatalf("reload gauge %v after a good load", v)
	}

	writeFile(t, dir, "r.yml", testRules+"  - alert: Broken\n    expr: x >\n")
	err := m.Reload()
	if err == nil || !strings.Contains(err.Error(), file+": 14:11:") {
		t.Fatalf("reload of a bad file: %v, want %s: 14:11: ...", err, file)
	}
	if v := testutil.ToFloat64(m.reloadOK); v != 0 {
		t.Errorf("reload gauge %v after a bad file", v)
	}
	if !strings.Contains(logs.String(), "14:11") {
		t.Errorf("log lacks the error's place: %s", logs.String())
	}
	before := lastEval()
	waitFor(t, 5*time.Second, "the old rules evaluating on", func() bool { return lastEval().After(before) })
	if n := len(m.rules.Rules()); n != 2 {
		t.Errorf("%d rules after the bad reload, want the old 2", n)
	}

	writeFile(t, dir, "r.yml", testRules+"  - record: x:tripled\n    expr: x * 3\n")
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(m.reloadOK); v != 1 || len(m.rules.Rules()) != 3 {
		t.Errorf("after the fix: gauge %v, %d rules", v, len(m.rules.Rules()))
	}
}

// TestForStateSurvivesRestart: an alert pending for a few seconds of its
// `for: 1m` keeps that time across a restart of the rules (restored from
// ALERTS_FOR_STATE) instead of starting its wait again.
func TestForStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir, query.Options{})
	file := writeFile(t, t.TempDir(), "r.yml", `groups:
- name: slow
  rules:
  - alert: XLong
    expr: x > 0
    for: 1m
`)
	e.add(t, time.Now(), 1, []string{"x", "node", "cn1"})
	o := Options{Files: []string{file}, Interval: 200 * time.Millisecond, ForGracePeriod: 100 * time.Millisecond}
	m, stop := e.start(t, o)
	var activeAt time.Time
	waitFor(t, 5*time.Second, "a pending alert", func() bool {
		if as := m.Alerts(); len(as) == 1 {
			activeAt = as[0].ActiveAt
		}
		return !activeAt.IsZero()
	})
	waitFor(t, 10*time.Second, "4 s of pending", func() bool { return time.Since(activeAt) > 4*time.Second })
	stop()
	time.Sleep(time.Second)

	restart := time.Now()
	m2, _ := e.start(t, o)
	var restored time.Time
	waitFor(t, 10*time.Second, "the restored alert", func() bool {
		for _, r := range m2.rules.AlertingRules() {
			if r.Restored() {
				if as := r.ActiveAlerts(); len(as) == 1 {
					restored = as[0].ActiveAt
					return true
				}
			}
		}
		return false
	})
	// Restored, the alert keeps the pending time it had before the stop
	// (about 4 s, less up to 2 s as ALERTS_FOR_STATE keeps seconds; the
	// downtime does not count); started afresh it would have none.
	if spent := restart.Sub(restored); spent < 2*time.Second {
		t.Errorf("pending for %v at the restart (activeAt %v, first %v): for state not restored", spent, restored, activeAt)
	}
}

// TestExpensiveRuleFails: a rule that loads more samples than the query
// limit fails its evaluation, is counted and is logged once, while a
// cheap rule beside it goes on; one longer than the length limit fails too.
func TestExpensiveRuleFails(t *testing.T) {
	e := newEnv(t, "", query.Options{MaxSamples: 100, MaxQueryLength: 200})
	now := time.Now()
	var ls [][]string
	for i := range 500 {
		ls = append(ls, []string{"big", "node", fmt.Sprintf("n%d", i)})
	}
	e.add(t, now, 1, ls...)
	e.add(t, now, 1, []string{"small", "node", "n0"})
	file := writeFile(t, t.TempDir(), "r.yml", `groups:
- name: g
  rules:
  - record: big:sum
    expr: sum(big)
  - record: small:sum
    expr: sum(small)
  - record: long:sum
    expr: sum(small)`+strings.Repeat(" + 0", 50)+`
`)
	reg := prometheus.NewRegistry()
	var logs vtestutil.SyncBuffer
	m, _ := e.start(t, Options{Files: []string{file}, Interval: 100 * time.Millisecond, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	fails := func() float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "prometheus_rule_evaluation_failures_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	waitFor(t, 10*time.Second, "5 failed evaluations", func() bool { return fails() >= 5 })
	for _, r := range m.rules.Rules() {
		if r.Name() == "big:sum" && (r.Health() != rules.HealthBad || !strings.Contains(r.LastError().Error(), "sample")) {
			t.Errorf("big:sum health %s, err %v", r.Health(), r.LastError())
		}
		if r.Name() == "long:sum" && (r.Health() != rules.HealthBad || !strings.Contains(r.LastError().Error(), "more than the 200 allowed")) {
			t.Errorf("long:sum health %s, err %v", r.Health(), r.LastError())
		}
		if r.Name() == "small:sum" && r.Health() != rules.HealthGood {
			t.Errorf("small:sum health %s, err %v", r.Health(), r.LastError())
		}
	}
	if n := strings.Count(logs.String(), "rule evaluation failed"); n != 2 {
		t.Errorf("failures logged %d times, want once for each of 2 rules:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "Evaluating rule failed") {
		t.Errorf("the engine's per-evaluation log line got through")
	}
}

// TestAPIShapes: /api/v1/rules and /api/v1/alerts answer with Prometheus'
// fields, and type= filters rules.
func TestAPIShapes(t *testing.T) {
	e := newEnv(t, "", query.Options{})
	file := writeFile(t, t.TempDir(), "r.yml", testRules)
	e.add(t, time.Now(), 3, []string{"x", "node", "cn1"})
	m, _ := e.start(t, Options{Files: []string{file}, Interval: 100 * time.Millisecond})
	mux := http.NewServeMux()
	m.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string, code int) map[string]any {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != code {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v: %s", path, err, b)
		}
		return v
	}
	waitFor(t, 10*time.Second, "a firing alert", func() bool {
		as := m.Alerts()
		return len(as) == 1 && as[0].State == rules.StateFiring
	})
	keys := func(v any) string {
		var ks []string
		for k := range v.(map[string]any) {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, ",")
	}
	all := get("/api/v1/rules", 200)
	g := all["data"].(map[string]any)["groups"].([]any)[0].(map[string]any)
	if k := keys(g); k != "evaluationTime,file,interval,lastEvaluation,limit,name,rules" {
		t.Errorf("group keys %s", k)
	}
	rs := g["rules"].([]any)
	if len(rs) != 2 {
		t.Fatalf("rules %v", rs)
	}
	if k := keys(rs[0]); k != "evaluationTime,health,labels,lastEvaluation,name,query,type" {
		t.Errorf("recording rule keys %s", k)
	}
	ar := rs[1].(map[string]any)
	if k := keys(ar); k != "alerts,annotations,duration,evaluationTime,health,keepFiringFor,labels,lastEvaluation,name,query,state,type" {
		t.Errorf("alerting rule keys %s", k)
	}
	if ar["type"] != "alerting" || ar["state"] != "firing" || ar["duration"] != 1.0 || ar["health"] != "ok" || g["interval"] != 0.1 {
		t.Errorf("alerting rule %v", ar)
	}
	alert := ar["alerts"].([]any)[0].(map[string]any)
	if k := keys(alert); k != "activeAt,annotations,labels,state,value" || alert["value"] != "3e+00" ||
		alert["labels"].(map[string]any)["node"] != "cn1" {
		t.Errorf("alert %v", alert)
	}
	for typ, want := range map[string]string{"alert": "alerting", "record": "recording"} {
		rs := get("/api/v1/rules?type="+typ, 200)["data"].(map[string]any)["groups"].([]any)[0].(map[string]any)["rules"].([]any)
		if len(rs) != 1 || rs[0].(map[string]any)["type"] != want {
			t.Errorf("type=%s: %v", typ, rs)
		}
	}
	if v := get("/api/v1/rules?type=bogus", 400); v["status"] != "error" || v["errorType"] != "bad_data" {
		t.Errorf("type=bogus: %v", v)
	}
	as := get("/api/v1/alerts", 200)["data"].(map[string]any)["alerts"].([]any)
	if len(as) != 1 || as[0].(map[string]any)["state"] != "firing" || as[0].(map[string]any)["annotations"].(map[string]any)["summary"] != "x is 3 on cn1" {
		t.Errorf("alerts %v", as)
	}
}

// TestRemovedGroupResolves: a reload that removes a group with a firing
// alert announces the alert resolved.
func TestRemovedGroupResolves(t *testing.T) {
	e := newEnv(t, "", query.Options{})
	dir := t.TempDir()
	file := writeFile(t, dir, "r.yml", "groups:\n- name: a\n  rules:\n  - alert: X\n    expr: x > 0\n")
	e.add(t, time.Now(), 1, []string{"x", "node", "cn1"})
	var ev sink
	m, _ := e.start(t, Options{Files: []string{file}, Interval: 100 * time.Millisecond, Events: &ev})
	waitFor(t, 5*time.Second, "the firing event", func() bool { return len(ev.all()) == 1 })
	writeFile(t, dir, "r.yml", "groups:\n- name: b\n  rules:\n  - record: x:sum\n    expr: sum(x)\n")
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := ev.all(); len(got) != 2 || got[1].Kind != events.KindAlertResolved || got[1].Node != "cn1" {
		t.Errorf("events after removing the group: %+v", got)
	}
}
