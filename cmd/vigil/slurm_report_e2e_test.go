package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/jobs/report"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/slurm"
)

// reportJobScript holds 200 MiB it has written to (every page resident)
// and burns one CPU until it has run for argv[3] seconds, then exits. It
// writes "held" to argv[1] once the memory is held, and at its end its own
// CPU seconds and wall time since its first instruction to argv[2]: the
// truth the report is checked against.
const reportJobScript = `import os, sys, time
t0 = time.time()
buf = b"\x01" * (200 << 20)
open(sys.argv[1], "w").write("held")
end = t0 + float(sys.argv[3])
while time.time() < end:
    pass
c = os.times()
open(sys.argv[2] + ".tmp", "w").write("%f %f" % (c.user + c.system, time.time() - t0))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
`

// TestE2ESlurmJobReport is the acceptance check of a job's report against
// a real Slurm: a batch job burns 1 CPU and holds 200 MiB for 15 s under a
// server (--slurm) fed by a sampler with the jobs plugin. After the job
// ends and its summary is stored, `vigil job report --json` gives its CPU
// efficiency and memory peak within 10 % of what the job measured of
// itself; after the server restarts with its raw data (blocks, head, WAL,
// rollups) deleted and only jobs/ kept, the report still answers, from
// the summary, with the same figures.
func TestE2ESlurmJobReport(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	py := findPython(t)
	c := slurm.Start(t, slurm.Options{Nodes: 1})
	node := c.Nodes[0]
	cfg := filepath.Join(c.Dir, "vigil.toml")
	if err := os.WriteFile(cfg, []byte("[plugins.jobs]\nnode_name = \""+node+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	httpAddr, wireAddr := freePort(t), freePort(t)
	srv := "http://" + httpAddr
	server := startSlurmServer(t, c, data, httpAddr, wireAddr)
	start(t, "sampler", "sampler", "--config", cfg, "--root", "/", "--plugins", "jobs", "--interval", "1s",
		"--listen", "none", "--upstream", wireAddr, "--node", "slurmtest")

	script := filepath.Join(c.Dir, "report.py")
	if err := os.WriteFile(script, []byte(reportJobScript), 0o644); err != nil {
		t.Fatal(err)
	}
	held, truthFile := filepath.Join(c.Dir, "held"), filepath.Join(c.Dir, "truth")
	// 15 s, not 10: Slurm's start and end are whole seconds and the
	// counters stop at the last 1 s tick before the cgroup goes, so the
	// report's figure is uncertain by about a second of the run, which is
	// 11 % of 9 s (seen: 0.898 for a job the truth puts at 1.000) but
	// under 7 % of 15 s.
	const runFor = 15 // seconds
	id := c.Submit(t, "-N1", "-n1", "-c1", "--mem=400M",
		"--wrap", fmt.Sprintf("exec %s %s %s %s %d", py, script, held, truthFile, runFor))
	c.WaitJob(t, id, 15*time.Second, "RUNNING")
	waitFor(t, 15*time.Second, "the job to hold its memory", func() bool { _, err := os.Stat(held); return err == nil })
	// Memory truth: the job's VmRSS while it holds its 200 MiB (the
	// interpreter included), read a second after the allocation.
	time.Sleep(time.Second)
	pids := c.PIDs(t, id, node)
	rss := procSum(t, pids, rssBytes)

	// The job ends by itself; the nodes report it ended on the next tick
	// and the server stores its summary 5 s later.
	waitFor(t, 30*time.Second, "the job's own CPU and wall time", func() bool { _, err := os.Stat(truthFile); return err == nil })
	b, err := os.ReadFile(truthFile)
	if err != nil {
		t.Fatal(err)
	}
	var cpuS, wallS float64
	if _, err := fmt.Sscanf(string(b), "%g %g", &cpuS, &wallS); err != nil || wallS <= 0 {
		t.Fatalf("truth file %q: %v", b, err)
	}
	var j jobs.Job
	defer func() {
		if t.Failed() {
			out, errOut, _ := run(t, "job", "report", id, "--server", srv, "--json")
			t.Logf("job %s in the index: %+v\nreport (tail): %s %s", id, j, tail(out, 1500), errOut)
		}
	}()
	waitFor(t, 25*time.Second, "job "+id+"'s summary in the index", func() bool {
		resp, err := http.Get(srv + "/api/v1/jobs/" + id)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var env struct{ Data jobs.Job }
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&env) != nil {
			return false
		}
		j = env.Data
		return j.Summary != nil
	})
	elapsed := j.End.Sub(j.Start).Seconds()
	// The job's truth: CPU seconds over the job's run time in the index
	// (1 allocated CPU), and its VmRSS. The job burns its CPU for its
	// whole run but shares the host's cores with whatever else runs, so
	// the truth is what it got, not 1.
	truthEff := cpuS / elapsed
	t.Logf("job %s: %.2f CPU s in %.2f s of its own wall time, %.2f s start to end in the index (%v – %v): CPU efficiency %.3f; VmRSS %.1f MiB",
		id, cpuS, wallS, elapsed, j.Start.Format(time.StampMilli), j.End.Format(time.StampMilli), truthEff, rss/(1<<20))
	if cpuS < 0.2*runFor { // the comparison below is with what the job got; under 20 % it says little
		t.Fatalf("the job burnt only %.2f CPU s in %d s: the host is too busy to check", cpuS, runFor)
	}

	jobReport := func() report.Report {
		t.Helper()
		out, errOut, code := run(t, "job", "report", id, "--server", srv, "--json")
		if code != 0 {
			t.Fatalf("vigil job report %s --json: exit %d: %s", id, code, errOut)
		}
		var r report.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("vigil job report --json: %v in %q", err, tail(out, 2000))
		}
		return r
	}
	check := func(when string, r report.Report) {
		t.Helper()
		s := r.Summary
		t.Logf("%s: source %s, CPU efficiency %.3f (truth %.3f), memory peak %.1f MiB (VmRSS %.1f MiB), elapsed %v, details %+v",
			when, r.Source, s.CPUEfficiency, truthEff, float64(s.MemUsedPeak)/(1<<20), rss/(1<<20), time.Duration(r.Elapsed), r.Details)
		if math.Abs(s.CPUEfficiency-truthEff) > 0.1*truthEff {
			t.Errorf("%s: CPU efficiency %.3f, the job's own %.3f: more than 10 %% apart", when, s.CPUEfficiency, truthEff)
		}
		if mem := float64(s.MemUsedPeak); math.Abs(mem-rss) > 0.1*rss || mem < 200<<20 {
			t.Errorf("%s: memory peak %.0f, VmRSS %.0f: more than 10 %% apart or below the 200 MiB held", when, mem, rss)
		}
		if len(s.PerNode) != 1 || s.PerNode[0].Node != "slurmtest" {
			t.Errorf("%s: per node %+v, want one row for slurmtest", when, s.PerNode)
		}
	}
	live := jobReport()
	if live.Source != "store" {
		t.Errorf("report before the restart: source %q, want store", live.Source)
	}
	check("from the store", live)
	if stored := *j.Summary; math.Abs(stored.CPUEfficiency-live.Summary.CPUEfficiency) > 0.01 || stored.MemUsedPeak != live.Summary.MemUsedPeak {
		t.Errorf("stored summary (CPU %.3f, memory %d) differs from the report's (CPU %.3f, memory %d)",
			stored.CPUEfficiency, stored.MemUsedPeak, live.Summary.CPUEfficiency, live.Summary.MemUsedPeak)
	}

	// Restart without the raw data: everything in the data directory but
	// the job index goes.
	server.stop(t)
	es, err := os.ReadDir(data)
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	for _, e := range es {
		if e.Name() == filepath.Base(jobs.DefaultDir(data)) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
			t.Fatal(err)
		}
		removed = append(removed, e.Name())
	}
	t.Logf("removed from the data directory: %v", removed)
	startSlurmServer(t, c, data, httpAddr, wireAddr)
	after := jobReport()
	if after.Source != "summary" {
		t.Errorf("report after the raw data went: source %q, want summary", after.Source)
	}
	check("from the summary", after)
	if after.Summary.CPUEfficiency != j.Summary.CPUEfficiency || after.Summary.MemUsedPeak != j.Summary.MemUsedPeak {
		t.Errorf("report after the restart (CPU %v, memory %d) differs from the stored summary (CPU %v, memory %d)",
			after.Summary.CPUEfficiency, after.Summary.MemUsedPeak, j.Summary.CPUEfficiency, j.Summary.MemUsedPeak)
	}
	if out, errOut, code := run(t, "job", "report", id, "--server", srv); code != 0 || !strings.Contains(out, id) {
		t.Errorf("vigil job report %s (text) after the restart: exit %d, %q, %s", id, code, tail(out, 1000), errOut)
	}
}

// startSlurmServer runs `vigil server --slurm` on data with Slurm's
// environment and waits until it is ready.
func startSlurmServer(t *testing.T, c *slurm.Cluster, data, httpAddr, wireAddr string) *proc {
	t.Helper()
	p := &proc{name: "server", cmd: vigil(t, "server", "--http", httpAddr, "--listen", wireAddr, "--data", data,
		"--interval", "1s", "--slurm", "--slurm-interval", "30s"), stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(c.Env(), "VIGIL_E2E_MAIN=1")
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill9()
		if t.Failed() {
			t.Logf("server (pid %d) stderr (tail):\n%s", p.cmd.Process.Pid, tail(p.stderr.String(), 3000))
		}
	})
	waitFor(t, 15*time.Second, "the server", func() bool {
		resp, err := http.Get("http://" + httpAddr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// stop ends p with SIGTERM, as an admin would, within 15 s.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("%s still running 15 s after SIGTERM", p.name)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited %d after SIGTERM", p.name, code)
	}
}
