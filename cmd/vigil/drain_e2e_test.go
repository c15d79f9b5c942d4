package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/slurm"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// TestE2ESlurmDrain runs the server with --drain-on-health against a real
// Slurm and streams two nodes' health series over the wire: a failing
// check drains the first node with Vigil's reason, its pass resumes it
// (idle again); the second, drained by hand with an admin's reason, stays
// drained through its check's failure and pass.
func TestE2ESlurmDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := slurm.Start(t, slurm.Options{Nodes: 2})
	cn1, cn2 := c.Nodes[0], c.Nodes[1]
	httpAddr, wireAddr := freePort(t), freePort(t)
	api := "http://" + httpAddr
	// The server runs scontrol with the cluster's SLURM_CONF.
	p := &proc{name: "server", cmd: vigil(t, "server", "--http", httpAddr, "--listen", wireAddr, "--data", t.TempDir(),
		"--interval", "200ms", "--disable-rollups", "--drain-on-health"), stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(c.Env(), "VIGIL_E2E_MAIN=1")
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill9()
		if t.Failed() {
			t.Logf("server stderr (tail):\n%s", tail(p.stderr.String(), 3000))
		}
	})
	waitFor(t, 15*time.Second, "the server", func() bool { _, err := http.Get(api + "/-/ready"); return err == nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Two nodes' health streams, as the sampler's health plugin sends them.
	cl, err := wire.NewClient(wire.ClientOptions{Addrs: []string{wireAddr}, Name: "e2e", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cl.Run(ctx) }()
	var mu sync.Mutex
	reasons := map[string]string{} // node: its failing check's reason ("" passes)
	setReason := func(node, r string) { mu.Lock(); reasons[node] = r; mu.Unlock() }
	go func() {
		streams := map[string]*wire.ClientStream{cn1: cl.NewStream(cn1), cn2: cl.NewStream(cn2)}
		load := metric.NewDesc("node_load1", "", metric.Gauge)
		for {
			for node, st := range streams {
				mu.Lock()
				r := reasons[node]
				mu.Unlock()
				var b metric.Batch
				b.Reset(time.Now())
				b.Add(load, 0.5)
				ok := 1.0
				if r != "" {
					ok = 0
				}
				b.Add(metric.NewDesc("vigil_health_check_ok", "", metric.Gauge, "check", "scratch_rw"), ok)
				if r != "" {
					b.Add(metric.NewDesc("vigil_health_check_failure", "", metric.Gauge, "check", "scratch_rw", "reason", r), 1)
				}
				cl.Tick(st, b.Time, b.Descs, b.Values)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()

	show := func(node string) (state, reason string) {
		out := c.Run(t, "scontrol", "-o", "show", "node", node)
		_, rest, _ := strings.Cut(out, " State=")
		state, _, _ = strings.Cut(rest, " ")
		if _, r, ok := strings.Cut(out, " Reason="); ok {
			reason = strings.TrimSpace(r)
		}
		return state, reason
	}
	waitState := func(node, what string, within time.Duration, cond func(state, reason string) bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			st, r := show(node)
			if cond(st, r) {
				t.Logf("%s: State=%s Reason=%s", node, st, r)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not %s after %v: State=%s Reason=%q", node, what, within, st, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	failing := func(node string) bool {
		resp, err := http.Get(api + "/api/v1/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Data struct {
				Nodes map[string][]struct{ Check, Reason string }
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatal(err)
		}
		return len(v.Data.Nodes[node]) > 0
	}
	waitHealth := func(node string, want bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); failing(node) != want; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("GET /api/v1/health: %s failing %v after 10 s, want %v", node, !want, want)
			}
		}
	}

	// cn1: fails → drained by Vigil, passes → resumed.
	failedAt := time.Now()
	setReason(cn1, "touch /scratch/.vigil: read-only file system")
	waitState(cn1, "drained by vigil", 15*time.Second, func(st, r string) bool {
		return strings.Contains(st, "DRAIN") && strings.HasPrefix(r, "vigil: scratch_rw: touch /scratch/.vigil: read-only file system")
	})
	t.Logf("%s drained within %v of its first failing tick", cn1, time.Since(failedAt).Round(time.Millisecond))
	passedAt := time.Now()
	setReason(cn1, "")
	waitState(cn1, "resumed, idle", 20*time.Second, func(st, r string) bool { return st == "IDLE" && r == "" })
	t.Logf("%s resumed and idle within %v of its first passing tick", cn1, time.Since(passedAt).Round(time.Millisecond))

	// cn2: an admin's drain wins.
	c.Run(t, "scontrol", "update", "NodeName="+cn2, "State=DRAIN", "Reason=admin: bad dimm")
	setReason(cn2, "no space left on /tmp")
	waitHealth(cn2, true)
	time.Sleep(time.Second) // the drainer's turn: it acts within milliseconds
	setReason(cn2, "")
	waitHealth(cn2, false)
	time.Sleep(time.Second)
	st, r := show(cn2)
	if !strings.Contains(st, "DRAIN") || !strings.HasPrefix(r, "admin: bad dimm") {
		t.Fatalf("%s: State=%s Reason=%q, want still drained by the admin", cn2, st, r)
	}
	// Vigil drained and resumed cn1 once each, and never touched cn2.
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`vigil_drain_actions_total{op="drain"} 1`, `vigil_drain_actions_total{op="resume"} 1`} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("/metrics has no %q", want)
		}
	}
}
