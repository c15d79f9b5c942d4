package alerting

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/query"
)

// TestAlertReachesAlertmanagerInTime: an alert reaches Alertmanager's API
// v2 (a fake one here) after its `for` has elapsed, never before, and
// within an evaluation interval of it (two allowed on a loaded machine;
// the lag is logged for docs/benchmarks.md).
func TestAlertReachesAlertmanagerInTime(t *testing.T) {
	var (
		mu      sync.Mutex
		arrived time.Time
	)
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v2/alerts" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var alerts []struct {
			Labels map[string]string `json:"labels"`
		}
		json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&alerts)
		mu.Lock()
		defer mu.Unlock()
		for _, a := range alerts {
			if a.Labels["alertname"] == "Slow" && arrived.IsZero() {
				arrived = time.Now()
			}
		}
	}))
	defer am.Close()
	const interval, hold = 500 * time.Millisecond, 2 * time.Second
	e := newEnv(t, "", query.Options{})
	e.add(t, time.Now(), 1, []string{"x", "node", "cn1"})
	file := writeFile(t, t.TempDir(), "r.yml", "groups:\n- name: g\n  rules:\n  - alert: Slow\n    expr: x > 0\n    for: 2s\n")
	m, _ := e.start(t, Options{Files: []string{file}, Interval: interval, Alertmanagers: []string{am.URL}})
	var activeAt time.Time
	waitFor(t, 10*time.Second, "the alert at Alertmanager", func() bool {
		if as := m.Alerts(); len(as) == 1 {
			activeAt = as[0].ActiveAt
		}
		mu.Lock()
		defer mu.Unlock()
		return !arrived.IsZero()
	})
	mu.Lock()
	lag := arrived.Sub(activeAt.Add(hold))
	mu.Unlock()
	t.Logf("alert at Alertmanager %v after its for elapsed (interval %v)", lag, interval)
	if lag < 0 || lag > 2*interval {
		t.Errorf("alert arrived %v after its for elapsed, want 0 to %v", lag, interval)
	}
}

// TestAlertsGoToEveryAlertmanager: with several --alertmanager URLs (an
// HA pair), each gets the alert, one of them under a path prefix.
func TestAlertsGoToEveryAlertmanager(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	fake := func(name, path string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == path && r.Method == http.MethodPost {
				mu.Lock()
				got[name]++
				mu.Unlock()
			}
		}))
	}
	a, b := fake("a", "/api/v2/alerts"), fake("b", "/am/api/v2/alerts")
	defer a.Close()
	defer b.Close()
	e := newEnv(t, "", query.Options{})
	e.add(t, time.Now(), 1, []string{"x", "node", "cn1"})
	file := writeFile(t, t.TempDir(), "r.yml", "groups:\n- name: g\n  rules:\n  - alert: X\n    expr: x > 0\n")
	e.start(t, Options{Files: []string{file}, Interval: 100 * time.Millisecond, Alertmanagers: []string{a.URL, b.URL + "/am"}})
	waitFor(t, 10*time.Second, "the alert at both Alertmanagers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["a"] > 0 && got["b"] > 0
	})
}
