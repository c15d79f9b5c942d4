package web

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

const chromium = "/usr/bin/chromium"

// browserEnv skips unless node, web/node_modules, Chromium and a built UI
// are all present, and returns the web/ directory.
func browserEnv(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	testutil.LookPeer(t, "node", "browser test needs node on PATH")
	webDir, err := filepath.Abs("../../web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "playwright-core")); err != nil {
		testutil.MissingPeer(t, "browser test needs web/node_modules: run (cd web && npm ci)")
	}
	if _, err := os.Stat(chromium); err != nil {
		testutil.MissingPeer(t, "browser test needs %s: apt-get install chromium", chromium)
	}
	if _, err := fs.Stat(dist, "dist/index.html"); err != nil {
		testutil.MissingPeer(t, "browser test needs the built UI: run make web")
	}
	return webDir
}

// clusterServer serves the dashboard and the fake Prometheus API of c.
func clusterServer(t *testing.T, c *fakeCluster) *httptest.Server {
	mux, _ := clusterMux(c)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// clusterMux routes the dashboard (h) and the fake APIs of c.
func clusterMux(c *fakeCluster) (*http.ServeMux, *Handler) {
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", c)
	jobs := newFakeJobs(time.Now())
	mux.Handle("/api/v1/jobs", jobs)
	mux.Handle("/api/v1/jobs/", jobs)
	// What vigil server answers when it runs without log intake.
	mux.HandleFunc("/api/v1/logs/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"status":"error","errorType":"unavailable","error":"log intake is off: start vigil server with --syslog-udp or --syslog-tcp"}`+"\n")
	})
	h := New(Options{Source: c, Interval: time.Second})
	mux.Handle("/", h)
	return mux, h
}

func runNode(t *testing.T, webDir string, timeout time.Duration, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(webDir, "test", script)}, args...)...)
	cmd.Dir = webDir
	out, err := cmd.CombinedOutput()
	t.Logf("%s output:\n%s", script, out)
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
}

// TestBrowserE2E drives the real UI in headless Chromium: heatmap fills,
// hover and click open a node, charts and processes load, Explore runs a
// query, the tree renders, the Logs view says when the server has no log
// service. Screenshots go to build/screenshots/.
func TestBrowserE2E(t *testing.T) {
	webDir := browserEnv(t)
	srv := clusterServer(t, newFakeCluster(300))
	shots, _ := filepath.Abs("../../build/screenshots")
	runNode(t, webDir, 3*time.Minute, "e2e.mjs", srv.URL, shots)
}

// TestBrowserAuth runs the dashboard behind basic auth, as `vigil server
// --web-config` serves it: every request and stream must carry the
// browser's credentials (test/auth-e2e.mjs), and leaving a view must end
// its requests and its live stream.
func TestBrowserAuth(t *testing.T) {
	webDir := browserEnv(t)
	c := newFakeCluster(50)
	mux, h := clusterMux(c)
	var slowStarted, slowCancelled atomic.Int64
	// A query that answers only when the client gives up, counted.
	mux.HandleFunc("/api/v1/query_range", func(w http.ResponseWriter, r *http.Request) { slow(w, r, c, &slowStarted, &slowCancelled) })
	mux.HandleFunc("/api/v1/query", func(w http.ResponseWriter, r *http.Request) { slow(w, r, c, &slowStarted, &slowCancelled) })
	mux.HandleFunc("GET /test/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{
			"streams": h.Stats().StreamsActive, "slowStarted": slowStarted.Load(), "slowCancelled": slowCancelled.Load(),
		})
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="vigil"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/api/web/nodes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: %s, want 401", resp.Status)
	}
	runNode(t, webDir, 2*time.Minute, "auth-e2e.mjs", srv.URL)
}

// slow holds queries of slow_metric until the client goes away (or 30 s),
// counting both; other queries go to the fake cluster.
func slow(w http.ResponseWriter, r *http.Request, c *fakeCluster, started, cancelled *atomic.Int64) {
	_ = r.ParseForm()
	if r.Form.Get("query") != "slow_metric" {
		c.ServeHTTP(w, r)
		return
	}
	started.Add(1)
	select {
	case <-r.Context().Done():
		cancelled.Add(1)
	case <-time.After(30 * time.Second):
		http.Error(w, "slow_metric: no one gave up", http.StatusGatewayTimeout)
	}
}

// TestBrowserPerf measures the heatmap's CPU use with 20,000 nodes at 1 Hz.
// It takes about 30 s, so it runs only with VIGIL_WEB_PERF=1.
func TestBrowserPerf(t *testing.T) {
	if os.Getenv("VIGIL_WEB_PERF") == "" {
		t.Skip("set VIGIL_WEB_PERF=1 to measure the heatmap with 20,000 nodes")
	}
	webDir := browserEnv(t)
	srv := clusterServer(t, newFakeCluster(20000))
	shots, _ := filepath.Abs("../../build/screenshots")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	runNode(t, webDir, 3*time.Minute, "perf.mjs", srv.URL, "20", shots)
}
