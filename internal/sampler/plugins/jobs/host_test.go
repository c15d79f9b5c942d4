//go:build linux

package jobs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// hostV1 makes real cgroup v1 job directories as Debian's Slurm does
// (<ctrl>/slurm_<node>/uid_0/job_<j>/step_batch/task_0, memory, cpuacct,
// cpuset, freezer) with one sleeping process in each, under a node name
// of its own. It skips unless run as root on a cgroup v1 hierarchy.
func hostV1(tb testing.TB, jobs int) (node string, remove func(job int)) {
	tb.Helper()
	const cg = "/sys/fs/cgroup"
	if os.Getuid() != 0 {
		tb.Skip("needs root to make cgroups")
	}
	for _, c := range ctrlNames {
		if _, err := os.Stat(filepath.Join(cg, c, "cgroup.procs")); err != nil {
			tb.Skipf("no cgroup v1 %s hierarchy", c)
		}
	}
	node = fmt.Sprintf("vigiltest%d", os.Getpid())
	base := "slurm_" + node
	cpus, _ := os.ReadFile(filepath.Join(cg, "cpuset", "cpuset.cpus"))
	mems, _ := os.ReadFile(filepath.Join(cg, "cpuset", "cpuset.mems"))
	procs := map[int]*exec.Cmd{}
	dirs := func(j int) []string {
		return []string{base, base + "/uid_0", fmt.Sprintf("%s/uid_0/job_%d", base, j),
			fmt.Sprintf("%s/uid_0/job_%d/step_batch", base, j), fmt.Sprintf("%s/uid_0/job_%d/step_batch/task_0", base, j)}
	}
	remove = func(j int) {
		if cmd := procs[j]; cmd != nil {
			cmd.Process.Kill()
			cmd.Wait()
			delete(procs, j)
		}
		for _, c := range ctrlNames {
			d := dirs(j)
			for i := len(d) - 1; i >= 2; i-- {
				os.Remove(filepath.Join(cg, c, d[i]))
			}
		}
	}
	tb.Cleanup(func() {
		for j := 1; j <= jobs; j++ {
			remove(j)
		}
		for _, c := range ctrlNames {
			os.Remove(filepath.Join(cg, c, base, "uid_0"))
			os.Remove(filepath.Join(cg, c, base))
		}
	})
	for j := 1; j <= jobs; j++ {
		for _, c := range ctrlNames {
			for _, d := range dirs(j) {
				p := filepath.Join(cg, c, d)
				if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
					tb.Fatal(err)
				}
				if c == "cpuset" {
					os.WriteFile(filepath.Join(p, "cpuset.cpus"), cpus, 0o644)
					os.WriteFile(filepath.Join(p, "cpuset.mems"), mems, 0o644)
				}
			}
		}
		cmd := exec.Command("sleep", "120")
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		procs[j] = cmd
		for _, c := range ctrlNames {
			task := filepath.Join(cg, c, dirs(j)[4], "cgroup.procs")
			if err := os.WriteFile(task, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return node, remove
}

// TestHostCgroupV1 follows jobs on the real kernel: a job's files read
// as they do there, and a removed job's kept-open files (which read
// ENODEV) end it within one tick.
func TestHostCgroupV1(t *testing.T) {
	if testing.Short() {
		t.Skip("makes real cgroups")
	}
	node, remove := hostV1(t, 2)
	cfg := DefaultConfig()
	cfg.NodeName = node
	p := newJobs(t, "/", cfg)
	t0 := time.Now()
	v := mustSample(t, p, t0)
	for _, j := range []string{"1", "2"} {
		if v["vigil_job_running "+j] != 1 || v["vigil_job_processes "+j] != 1 || v["vigil_job_threads "+j] != 1 || v["vigil_job_uid "+j] != 0 {
			t.Errorf("job %s: running %v processes %v threads %v uid %v, want 1 1 1 0", j, v["vigil_job_running "+j],
				v["vigil_job_processes "+j], v["vigil_job_threads "+j], v["vigil_job_uid "+j])
		}
		// Memory stays charged where sleep allocated it (v1 does not move
		// charges with the process): present, not necessarily above zero.
		if _, ok := v["vigil_job_memory_used_bytes "+j]; !ok || v["vigil_job_cpus "+j] < 1 {
			t.Errorf("job %s: memory present %v, cpus %v; want present and >= 1", j, ok, v["vigil_job_cpus "+j])
		}
	}
	remove(1)
	v = mustSample(t, p, t0.Add(time.Second))
	if got, ok := v["vigil_job_running 1"]; !ok || got != 0 || v["vigil_job_running 2"] != 1 || v["vigil_jobs_ended_total "] != 1 {
		t.Errorf("after job 1 ended: running 1 = %v (%v), running 2 = %v, ended %v; want 0, 1, 1", got, ok,
			v["vigil_job_running 2"], v["vigil_jobs_ended_total "])
	}
}

// BenchmarkSampleHost is BenchmarkSample on the real kernel's cgroup v1
// files: 4 jobs of one process each.
func BenchmarkSampleHost(b *testing.B) {
	node, _ := hostV1(b, 4)
	cfg := DefaultConfig()
	cfg.NodeName = node
	p := newJobs(b, "/", cfg)
	var batch metric.Batch
	now := time.Unix(1700000000, 0)
	if err := p.Sample(context.Background(), now, &batch); err != nil || len(p.order) != 4 {
		b.Fatalf("first tick: %v, %d jobs", err, len(p.order))
	}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		batch.Reset(now)
		if err := p.Sample(context.Background(), now, &batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4, "ns/job")
}
