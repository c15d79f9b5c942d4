package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// fabricLinks counts the links of /api/v1/fabric carrying traffic.
func fabricLinks(base string) (links, busy int, err error) {
	resp, err := http.Get(base + "/api/v1/fabric?window=1m")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Links []struct {
				Tx float64 `json:"tx_bytes_per_second"`
			} `json:"links"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, 0, err
	}
	for _, l := range r.Data.Links {
		if l.Tx > 0 {
			busy++
		}
	}
	return len(r.Data.Links), busy, nil
}

// TestWebFabricE2E runs `vigil demo` (which simulates a swept fat tree)
// and drives the Fabric view in headless Chromium (web/test/fabric-e2e.mjs):
// the tree drawn, colours, hover, a click on the worst link for its charts
// and jobs, a job page's fabric links, then the render time of a synthetic
// 256-switch fabric. `vigil fabric top` must list the same worst link.
// Screenshots go to build/screenshots/fabric-*.png.
func TestWebFabricE2E(t *testing.T) {
	webDir := webE2EEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	addr := freePort(t)
	base := "http://" + addr
	cmd := vigil(t, "demo", "--nodes", "72", "--http", addr, "--data", t.TempDir())
	var stdout, stderr testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("demo stderr:\n%s", stderr.String())
		}
	}()
	// 72 nodes: 4 leaves of 18, 2 spines; 72 node ports and 4 × 2 links
	// from both ends. Rates need two sweeps.
	for {
		links, busy, _ := fabricLinks(base)
		if links == 88 && busy == links {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("fabric: %d links, %d carrying traffic; want 88, all", links, busy)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if page, err := scrape(base + "/"); err != nil || !strings.Contains(page, "app.js") {
		testutil.MissingPeer(t, "this binary serves no dashboard (err %v): run make web before go test", err)
	}
	top := vigil(t, "fabric", "top", "--server", base, "--by", "bytes", "--limit", "3")
	out, err := top.CombinedOutput()
	if err != nil || !strings.Contains(string(out), " → ") || !strings.Contains(string(out), "3 of 88 links by bytes") {
		t.Fatalf("vigil fabric top: %v\n%s", err, out)
	}
	t.Logf("vigil fabric top --by bytes:\n%s", out)
	shots, err := filepath.Abs("../../build/screenshots")
	if err != nil {
		t.Fatal(err)
	}
	node := exec.CommandContext(ctx, "node", filepath.Join(webDir, "test", "fabric-e2e.mjs"), base, shots)
	node.Dir = webDir
	nout, err := node.CombinedOutput()
	t.Logf("fabric-e2e.mjs output:\n%s", nout)
	if err != nil {
		t.Errorf("fabric-e2e.mjs: %v", err)
	}
}
