package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// webE2EEnv skips unless node, web/node_modules, Chromium and the built
// dashboard (embedded when this test binary was compiled) are present, and
// returns the web/ directory.
func webE2EEnv(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser end-to-end test skipped in -short mode")
	}
	testutil.LookPeer(t, "node", "browser test needs node on PATH")
	webDir, err := filepath.Abs("../../web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(webDir, "node_modules", "playwright-core")); err != nil {
		testutil.MissingPeer(t, "browser test needs web/node_modules: run (cd web && npm ci)")
	}
	if _, err := os.Stat("/usr/bin/chromium"); err != nil {
		testutil.MissingPeer(t, "browser test needs /usr/bin/chromium: apt-get install chromium")
	}
	if _, err := os.Stat("../../internal/web/dist/index.html"); err != nil {
		testutil.MissingPeer(t, "browser test needs the built dashboard: run make web")
	}
	return webDir
}

// promScalar runs an instant query whose answer is one sample and returns
// its value, or an error while there is none yet.
func promScalar(base, expr string) (float64, error) {
	resp, err := http.PostForm(base+"/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%s: %d results", expr, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(s, 64)
}

// runningJobs counts the server's running jobs, and those with their
// scheduler's user, partition and CPUs.
func runningJobs(base string) (running, withMeta int, err error) {
	resp, err := http.Get(base + "/api/v1/jobs?state=running")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data []struct {
			User      string `json:"user"`
			Partition string `json:"partition"`
			CPUs      int    `json:"cpus"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, 0, err
	}
	for _, j := range r.Data {
		if j.User != "" && j.Partition != "" && j.CPUs > 0 {
			withMeta++
		}
	}
	return len(r.Data), withMeta, nil
}

func logsAccepted(base string) (uint64, error) {
	resp, err := http.Get(base + "/api/v1/logs/stats")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Accepted uint64 `json:"accepted"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st.Accepted, err
}

// TestWebDemoE2E runs the real `vigil demo` and drives its dashboard in
// headless Chromium (web/test/demo-e2e.mjs): heatmap of real nodes, a
// node's charts, a PromQL query in Explore, the aggregator tree, and the
// Logs view (search, load more, pattern filter, live tail). Screenshots go
// to build/screenshots/demo-*.png. The demo must stop cleanly on SIGINT.
func TestWebDemoE2E(t *testing.T) {
	webDir := webE2EEnv(t)
	const nodes = 64
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	addr := freePort(t)
	base := "http://" + addr
	data := t.TempDir()
	cmd := vigil(t, "demo", "--nodes", strconv.Itoa(nodes), "--http", addr, "--data", data)
	var stdout, stderr testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	stop := func() error {
		stopped = true
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			return fmt.Errorf("SIGINT: %w", err)
		}
		select {
		case err := <-exited:
			return err
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("demo did not exit within 15s of SIGINT")
		}
	}
	defer func() {
		if !stopped {
			stop()
		}
		if t.Failed() {
			t.Logf("demo stdout:\n%s\ndemo stderr:\n%s", stdout.String(), stderr.String())
		}
	}()

	// Wait for every node to be up in the store and for syslog traffic.
	var up float64
	var accepted uint64
	for {
		up, _ = promScalar(base, "count(up == 1)")
		accepted, _ = logsAccepted(base)
		if up >= nodes+1 && accepted > 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("demo exited early: %v", err)
		case <-ctx.Done():
			t.Fatalf("after the start-up wait: %v nodes up (want %d), %d log messages", up, nodes+1, accepted)
		case <-time.After(250 * time.Millisecond):
		}
	}
	if page, err := scrape(base + "/"); err != nil || !strings.Contains(page, "app.js") {
		testutil.MissingPeer(t, "this binary serves no dashboard (err %v): run make web before go test", err)
	}
	t.Logf("demo ready: %v nodes up, %d log messages", up, accepted)
	// The simulated scheduler's jobs are in the store from the first ticks.
	for {
		jobs, _ := promScalar(base, "count(count by (jobid) (vigil_job_running == 1))")
		if jobs > 0 {
			t.Logf("%v simulated jobs running", jobs)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no simulated job's vigil_job_running in the store")
		case <-time.After(250 * time.Millisecond):
		}
	}
	// The simulator posts its jobs' starts (--job-events): the server's
	// index has their scheduler metadata, not only what the nodes report.
	for {
		running, withMeta, err := runningJobs(base)
		if err == nil && running > 0 && withMeta == running {
			t.Logf("%d running jobs in the index, all with user, partition and CPUs", running)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/api/v1/jobs?state=running: %d jobs, %d with user, partition and CPUs (err %v)", running, withMeta, err)
		case <-time.After(250 * time.Millisecond):
		}
	}

	shots, err := filepath.Abs("../../build/screenshots")
	if err != nil {
		t.Fatal(err)
	}
	node := exec.CommandContext(ctx, "node", filepath.Join(webDir, "test", "demo-e2e.mjs"), base, strconv.Itoa(nodes), shots)
	node.Dir = webDir
	out, err := node.CombinedOutput()
	t.Logf("demo-e2e.mjs output:\n%s", out)
	if err != nil {
		t.Errorf("demo-e2e.mjs: %v", err)
	}

	if err := stop(); err != nil {
		t.Errorf("demo did not exit cleanly on SIGINT: %v", err)
	}
	if !strings.Contains(stdout.String(), "Vigil demo stopped.") {
		t.Errorf("demo did not report a clean stop; stdout:\n%s", stdout.String())
	}
	if s := stderr.String(); strings.Contains(s, "panic:") || strings.Contains(s, "level=ERROR") {
		t.Errorf("demo logged errors:\n%s", s)
	}
}
