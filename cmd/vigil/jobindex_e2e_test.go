package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/slurm"
)

// TestE2ESlurmJobIndex runs the server with --slurm against a real Slurm
// and a sampler with the jobs plugin on its node: a batch job is in `vigil
// job list` with its user and partition within 2 s of its start, and
// completed after it ends.
func TestE2ESlurmJobIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	c := slurm.Start(t, slurm.Options{Nodes: 1})
	node := c.Nodes[0]
	cfg := filepath.Join(c.Dir, "vigil.toml")
	if err := os.WriteFile(cfg, []byte("[plugins.jobs]\nnode_name = \""+node+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr, wireAddr := freePort(t), freePort(t)
	srv := "http://" + httpAddr
	// The server runs Slurm's clients with the cluster's SLURM_CONF.
	p := &proc{name: "server", cmd: vigil(t, "server", "--http", httpAddr, "--listen", wireAddr, "--data", t.TempDir(),
		"--interval", "1s", "--disable-rollups", "--slurm", "--slurm-interval", "30s"), stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
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
	waitFor(t, 15*time.Second, "the server", func() bool { _, err := http.Get(srv + "/-/ready"); return err == nil })
	start(t, "sampler", "sampler", "--config", cfg, "--root", "/", "--plugins", "jobs", "--interval", "1s",
		"--listen", "none", "--upstream", wireAddr, "--node", "slurmtest")

	started := filepath.Join(c.Dir, "started")
	id := c.Submit(t, "-N1", "-n1", "-c1", "--mem=100M", "--wrap", "date +%s.%N > "+started+"; exec sleep 4")
	list := func(args ...string) []jobs.Job {
		out, errOut, code := run(t, append([]string{"job", "list", "--json", "--server", srv}, args...)...)
		if code != 0 {
			t.Fatalf("vigil job list: exit %d: %s", code, errOut)
		}
		var l []jobs.Job
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("vigil job list --json: %v in %q", err, out)
		}
		return l
	}
	find := func(l []jobs.Job) *jobs.Job {
		for i := range l {
			if l[i].ID == id {
				return &l[i]
			}
		}
		return nil
	}
	var j *jobs.Job
	var seen time.Time
	waitFor(t, 20*time.Second, "job "+id+" listed with its user and partition", func() bool {
		j, seen = find(list("--user", "root")), time.Now()
		return j != nil && j.Partition == "test" && j.State == jobs.StateRunning && len(j.Nodes) == 1
	})
	// Slurm counts the job running (and the sampler lists it) before its
	// step has run the script's first command, so the start file may not
	// be there yet (CI flake): wait for it. A listing before the script
	// ran is a negative lag, within bounds.
	var b []byte
	waitFor(t, 10*time.Second, "job "+id+"'s start file", func() bool {
		var err error
		b, err = os.ReadFile(started)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	t0, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		t.Fatalf("start file %q: %v", b, err)
	}
	lag := seen.Sub(time.Unix(0, int64(t0*1e9)))
	t.Logf("job %s listed %v after it started: %+v", id, lag.Round(time.Millisecond), *j)
	if lag > 2*time.Second {
		t.Errorf("job %s listed %v after its start, want ≤ 2 s", id, lag)
	}
	if j.Nodes[0] != "slurmtest" || j.CPUs != 1 || j.MemBytes != 100<<20 || j.Submit.IsZero() {
		t.Errorf("job %s: %+v, want node slurmtest (Vigil's name), 1 CPU, 100 MiB, a submit time", id, *j)
	}
	waitFor(t, 30*time.Second, "job "+id+" completed", func() bool {
		j = find(list("--state", "completed"))
		return j != nil
	})
	if j.End.Before(j.Start) || j.End.Sub(j.Start) < 3*time.Second || j.ExitCode != 0 {
		t.Errorf("completed job: %+v", *j)
	}
	out, _, code := run(t, "job", "list", "--server", srv)
	t.Logf("vigil job list:\n%s", out)
	var row []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == id {
			row = f
		}
	}
	if code != 0 || len(row) != 8 || row[1] != "root" || row[2] != "test" || row[3] != "completed" || row[4] != "slurmtest" {
		t.Errorf("vigil job list (table): exit %d, row of job %s: %q", code, id, row)
	}
	if _, errOut, code := run(t, "job", "show", "999999", "--server", srv); code != 1 || !strings.Contains(errOut, "no such job") {
		t.Errorf("vigil job show 999999: exit %d, %q; want 1, no such job", code, errOut)
	}
}
