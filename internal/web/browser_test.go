package web

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", c)
	// What vigil server answers when it runs without log intake.
	mux.HandleFunc("/api/v1/logs/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"status":"error","errorType":"unavailable","error":"log intake is off: start vigil server with --syslog-udp or --syslog-tcp"}`+"\n")
	})
	mux.Handle("/", New(Options{Source: c, Interval: time.Second}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
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
