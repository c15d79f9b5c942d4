package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2ERecordReplayDemo: `vigil record` on the fixture node, then
// `vigil demo --replay` serves every simulated node with the recorded values.
func TestE2ERecordReplayDemo(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "node1.prom.gz")
	stdout, stderr, code := run(t, "record", "--root", "testdata/node1", "--out", rec, "--interval", "50ms", "--duration", "200ms")
	if code != 0 || !strings.Contains(stdout, "recorded 4 ticks") {
		t.Fatalf("record: exit %d\n%s\n%s", code, stdout, stderr)
	}
	const nodes = 5
	addr := freePort(t)
	base := "http://" + addr
	start(t, "demo", "demo", "--nodes", "5", "--http", addr, "--replay", rec, "--interval", "200ms")
	var up, load float64
	waitUntil(t, "replayed nodes up", 30*time.Second, func() bool {
		up, _ = promScalar(base, "count(up == 1)")
		load, _ = promScalar(base, `node_load1{node="cn00003"}`)
		return up >= nodes+1 && load == 0.76 // testdata/node1/proc/loadavg
	})
	// The replay wraps past the 4 recorded ticks without counter resets.
	waitUntil(t, "replay wrapped", 30*time.Second, func() bool {
		n, err := promScalar(base, `count_over_time(node_context_switches_total{node="cn00002"}[1m])`)
		resets, rerr := promScalar(base, `sum(resets(node_cpu_seconds_total{node="cn00002"}[1m]))`)
		return err == nil && rerr == nil && n > 8 && resets == 0
	})
}
