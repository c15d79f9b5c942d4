//go:build linux

package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) {
	testutil.FixtureCases(t, "jobs", nil)
}

func newJobs(t testing.TB, root string, cfg *Config) *Jobs {
	t.Helper()
	if cfg == nil {
		cfg = DefaultConfig()
	}
	p, _ := testutil.NewPlugin(t, "jobs", root, cfg)
	j := p.(*Jobs)
	t.Cleanup(func() { j.Close() })
	return j
}

// values maps "name job" (job empty for node series) to the value.
func values(b *metric.Batch) map[string]float64 {
	m := map[string]float64{}
	for _, s := range b.Samples() {
		job := ""
		for _, l := range s.Desc.Labels {
			if l.Name == "jobid" {
				job = l.Value
			}
		}
		k := s.Desc.Name + " " + job
		if _, dup := m[k]; dup {
			m[k+" DUPLICATE"] = s.Value
		}
		m[k] = s.Value
	}
	return m
}

func sample(t testing.TB, p *Jobs, now time.Time) (map[string]float64, error) {
	t.Helper()
	var b metric.Batch
	b.Reset(now)
	err := p.Sample(context.Background(), now, &b)
	return values(&b), err
}

func mustSample(t testing.TB, p *Jobs, now time.Time) map[string]float64 {
	t.Helper()
	v, err := sample(t, p, now)
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	for k := range v {
		if strings.HasSuffix(k, "DUPLICATE") {
			t.Fatalf("series emitted twice in one tick: %s", k)
		}
	}
	return v
}

// copyTree copies a fixture so a test may change it.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStartEnd checks a job is seen on the first tick after its cgroup
// appears and reported ended (running 0, then no series) on the first
// tick after it goes, in both layouts.
func TestStartEnd(t *testing.T) {
	for _, tc := range []struct{ fixture, jobDir, newJob, newDir string }{
		{"testdata/v1", "sys/fs/cgroup/memory/slurm_cn01/uid_1001/job_1002", "77", "sys/fs/cgroup/memory/slurm_cn01/uid_1002/job_77"},
		{"testdata/v2", "sys/fs/cgroup/system.slice/slurmstepd.scope/job_2002", "77", "sys/fs/cgroup/system.slice/slurmstepd.scope/job_77"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			root := copyTree(t, tc.fixture)
			p := newJobs(t, root, nil)
			t0 := time.Unix(1700000000, 0)
			v := mustSample(t, p, t0)
			if v["vigil_jobs "] != 2 {
				t.Fatalf("vigil_jobs = %v, want 2", v["vigil_jobs "])
			}
			// A new job, with a process in a task directory.
			task := filepath.Join(root, tc.newDir, "step_0", "task_0")
			if strings.Contains(tc.newDir, "slurmstepd.scope") {
				task = filepath.Join(root, tc.newDir, "step_0", "user", "task_0")
			}
			write(t, filepath.Join(task, "cgroup.procs"), "4242\n")
			write(t, filepath.Join(task, "cgroup.threads"), "4242\n4243\n")
			write(t, filepath.Join(task, "tasks"), "4242\n4243\n")
			v = mustSample(t, p, t0.Add(time.Second))
			if v["vigil_job_running "+tc.newJob] != 1 || v["vigil_job_processes "+tc.newJob] != 1 || v["vigil_job_threads "+tc.newJob] != 2 {
				t.Errorf("new job: running %v processes %v threads %v, want 1 1 2", v["vigil_job_running "+tc.newJob],
					v["vigil_job_processes "+tc.newJob], v["vigil_job_threads "+tc.newJob])
			}
			if v["vigil_jobs "] != 3 {
				t.Errorf("vigil_jobs = %v, want 3", v["vigil_jobs "])
			}
			// A job ends: one tick with running 0 and nothing else, then gone.
			if err := os.RemoveAll(filepath.Join(root, tc.jobDir)); err != nil {
				t.Fatal(err)
			}
			id := tc.jobDir[strings.LastIndex(tc.jobDir, "_")+1:]
			v = mustSample(t, p, t0.Add(2*time.Second))
			if got, ok := v["vigil_job_running "+id]; !ok || got != 0 {
				t.Errorf("ended job: running = %v (present %v), want 0", got, ok)
			}
			if _, ok := v["vigil_job_cpu_user_seconds_total "+id]; ok {
				t.Errorf("ended job still has cpu series")
			}
			if v["vigil_jobs_ended_total "] != 1 || v["vigil_jobs "] != 2 {
				t.Errorf("ended_total %v jobs %v, want 1 and 2", v["vigil_jobs_ended_total "], v["vigil_jobs "])
			}
			v = mustSample(t, p, t0.Add(3*time.Second))
			for k := range v {
				if strings.HasSuffix(k, " "+id) {
					t.Errorf("ended job still reported a tick later: %s", k)
				}
			}
			if v["vigil_jobs_ended_total "] != 1 {
				t.Errorf("ended_total = %v, want 1 (counted once)", v["vigil_jobs_ended_total "])
			}
		})
	}
}

// TestVanishMidRead removes a job's files between listing and reading:
// the job ends once, counted as vanished, with no error.
func TestVanishMidRead(t *testing.T) {
	root := copyTree(t, "testdata/v2")
	cfg := DefaultConfig()
	cfg.MaxOpenFiles = 0 // see TestStepChanges
	p := newJobs(t, root, cfg)
	t0 := time.Unix(1700000000, 0)
	mustSample(t, p, t0)
	dir := filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_2001")
	// The job ends after the listing saw it, before its files are read.
	p.discovered = func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	v, err := sample(t, p, t0.Add(time.Second))
	p.discovered = nil
	if err != nil {
		t.Fatalf("vanished job gave an error: %v", err)
	}
	if v["vigil_job_running 2001"] != 0 || v["vigil_jobs_vanished_total "] != 1 || v["vigil_jobs_ended_total "] != 1 {
		t.Errorf("running %v vanished %v ended %v, want 0 1 1", v["vigil_job_running 2001"], v["vigil_jobs_vanished_total "], v["vigil_jobs_ended_total "])
	}
	if _, ok := v["vigil_job_memory_used_bytes 2001"]; ok {
		t.Error("vanished job has memory series")
	}
	v = mustSample(t, p, t0.Add(2*time.Second))
	if _, ok := v["vigil_job_running 2001"]; ok || v["vigil_jobs_vanished_total "] != 1 {
		t.Errorf("vanished job: running present %v, vanished_total %v; want absent and 1", ok, v["vigil_jobs_vanished_total "])
	}
}

// TestProcIO checks that I/O summed from /proc/<pid>/io only grows: an
// exiting process keeps what it did, a new one adds all of its own.
func TestProcIO(t *testing.T) {
	root := copyTree(t, "testdata/v2")
	p := newJobs(t, root, nil)
	t0 := time.Unix(1700000000, 0)
	v := mustSample(t, p, t0)
	if v["vigil_job_read_bytes_total 2002"] != 400 || v["vigil_job_write_bytes_total 2002"] != 600 {
		t.Fatalf("read %v write %v, want 400 600", v["vigil_job_read_bytes_total 2002"], v["vigil_job_write_bytes_total 2002"])
	}
	task1 := filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_2002/step_0/user/task_1")
	write(t, filepath.Join(task1, "cgroup.procs"), "9300\n")
	write(t, filepath.Join(task1, "cgroup.threads"), "9300\n")
	write(t, filepath.Join(root, "proc/9100/io"), "read_bytes: 150\nwrite_bytes: 200\n")
	write(t, filepath.Join(root, "proc/9300/io"), "read_bytes: 1000\nwrite_bytes: 1\n")
	v = mustSample(t, p, t0.Add(time.Second))
	// 9100: +50 read; 9200 exited (keeps 300/400); 9300 new: +1000/+1.
	if v["vigil_job_read_bytes_total 2002"] != 1450 || v["vigil_job_write_bytes_total 2002"] != 601 {
		t.Errorf("read %v write %v, want 1450 601", v["vigil_job_read_bytes_total 2002"], v["vigil_job_write_bytes_total 2002"])
	}
	cfg := DefaultConfig()
	cfg.MaxIOPIDs = 1
	p2 := newJobs(t, root, cfg)
	v = mustSample(t, p2, t0)
	if v["vigil_jobs_io_skipped_total "] != 1 {
		t.Errorf("io_skipped = %v with max_io_pids 1 and 2 pids, want 1", v["vigil_jobs_io_skipped_total "])
	}
}

func TestOddNames(t *testing.T) {
	p := newJobs(t, "testdata/v1", nil)
	v := mustSample(t, p, time.Unix(1700000000, 0))
	// uid_abc and job_12x; "system" is Slurm's own.
	if v["vigil_jobs_ignored_entries "] != 2 {
		t.Errorf("ignored = %v, want 2", v["vigil_jobs_ignored_entries "])
	}
	for _, name := range []string{"job_01", "job_", "job_-1", "job_4294967296", "job_1a", "xjob_1", "job_12345678901"} {
		if _, ok := parseID([]byte(name), "job_"); ok {
			t.Errorf("parseID(%q) accepted", name)
		}
	}
	for name, want := range map[string]uint32{"job_1": 1, "job_0": 0, "job_4294967295": 4294967295, "uid_1000": 0} {
		got, ok := parseID([]byte(name), "job_")
		if name == "uid_1000" {
			if ok {
				t.Errorf("parseID(%q, job_) accepted", name)
			}
			continue
		}
		if name == "job_0" {
			continue
		}
		if !ok || got != want {
			t.Errorf("parseID(%q) = %d, %v, want %d", name, got, ok, want)
		}
	}
}

func TestMaxJobs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxJobs = 1
	p := newJobs(t, "testdata/v2", cfg)
	v := mustSample(t, p, time.Unix(1700000000, 0))
	if v["vigil_jobs "] != 1 || v["vigil_jobs_untracked "] != 1 {
		t.Errorf("jobs %v untracked %v, want 1 and 1", v["vigil_jobs "], v["vigil_jobs_untracked "])
	}
}

func TestNodeName(t *testing.T) {
	for _, tc := range []struct {
		node string
		want float64
	}{{"cn01", 1}, {"cn02", 0}, {"", 1}} {
		cfg := DefaultConfig()
		cfg.NodeName = tc.node
		p := newJobs(t, "testdata/v2noslice", cfg)
		v, err := sample(t, p, time.Unix(1700000000, 0))
		if tc.want == 0 {
			if !errors.Is(err, sampler.ErrNotAvailable) {
				t.Errorf("node_name %q: err = %v, want ErrNotAvailable", tc.node, err)
			}
			continue
		}
		if err != nil || v["vigil_jobs "] != tc.want {
			t.Errorf("node_name %q: jobs = %v, err %v, want %v", tc.node, v["vigil_jobs "], err, tc.want)
		}
	}
}

// TestNoSlurm: a node without Slurm cgroups emits nothing, does not
// allocate, and finds Slurm once it starts (within the rescan interval).
func TestNoSlurm(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "sys/fs/cgroup/cgroup.controllers"), "cpu memory\n")
	p := newJobs(t, root, nil)
	t0 := time.Unix(1700000000, 0)
	var b metric.Batch
	if err := p.Sample(context.Background(), t0, &b); !errors.Is(err, sampler.ErrNotAvailable) || b.Len() != 0 {
		t.Fatalf("err %v, %d samples; want ErrNotAvailable and none", err, b.Len())
	}
	if n := testing.AllocsPerRun(20, func() { _ = p.Sample(context.Background(), t0, &b) }); n != 0 && !testutil.RaceEnabled {
		t.Errorf("a node without Slurm costs %v allocations a tick, want 0", n)
	}
	write(t, filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_5/step_0/user/task_0/cgroup.procs"), "10\n")
	if _, err := sample(t, p, t0.Add(time.Second)); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("before the rescan interval: err = %v, want ErrNotAvailable (not looked for yet)", err)
	}
	v := mustSample(t, p, t0.Add(10*time.Second))
	if v["vigil_job_running 5"] != 1 || v["vigil_job_processes 5"] != 1 {
		t.Errorf("job after Slurm started: running %v processes %v, want 1 1", v["vigil_job_running 5"], v["vigil_job_processes 5"])
	}
	// No cgroup file system at all: the plugin is left out.
	testutil.InitNotAvailable(t, "jobs")
}

// TestUnknownLayout: a Slurm directory where no known layout puts one is
// said once and nothing is emitted.
func TestUnknownLayout(t *testing.T) {
	var logs bytes.Buffer
	reg, _ := sampler.Lookup("jobs")
	p := reg.New(reg.NewConfig())
	env := sampler.Env{FS: kernfs.NewFS("testdata/unknown"), Logger: slog.New(slog.NewTextHandler(&logs, nil)), Stats: &sampler.Stats{}}
	if err := p.Init(env); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	for i := range 25 {
		var b metric.Batch
		if err := p.Sample(context.Background(), t0.Add(time.Duration(i)*time.Second), &b); !errors.Is(err, sampler.ErrNotAvailable) || b.Len() != 0 {
			t.Fatalf("tick %d: err %v, %d samples; want ErrNotAvailable and none", i, err, b.Len())
		}
	}
	if n := strings.Count(logs.String(), "unknown Slurm cgroup layout"); n != 1 {
		t.Errorf("unknown layout logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestStepChanges: a step that ends is noticed at once (its files vanish),
// a new one at the next rescan.
func TestStepChanges(t *testing.T) {
	root := copyTree(t, "testdata/v1")
	// Files are reopened each tick: a kept-open file of a removed cgroup
	// reads ENODEV, but on a fixture it would still read its old content.
	cfg := DefaultConfig()
	cfg.MaxOpenFiles = 0
	p := newJobs(t, root, cfg)
	t0 := time.Unix(1700000000, 0)
	v := mustSample(t, p, t0)
	if v["vigil_job_processes 1002"] != 3 {
		t.Fatalf("processes = %v, want 3", v["vigil_job_processes 1002"])
	}
	job := filepath.Join(root, "sys/fs/cgroup/memory/slurm_cn01/uid_1001/job_1002")
	if err := os.RemoveAll(filepath.Join(job, "step_0")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(job, "step_1/task_0/cgroup.procs"), "6000\n6001\n")
	write(t, filepath.Join(job, "step_1/task_0/tasks"), "6000\n6001\n")
	v = mustSample(t, p, t0.Add(time.Second))
	if v["vigil_job_processes 1002"] != 1 {
		t.Errorf("after step_0 ended: processes = %v, want 1", v["vigil_job_processes 1002"])
	}
	v = mustSample(t, p, t0.Add(2*time.Second))
	if v["vigil_job_processes 1002"] != 3 {
		t.Errorf("rescan after a leaf vanished: processes = %v, want 3 (step_extern + step_1)", v["vigil_job_processes 1002"])
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.MaxJobs = 0 }, "max_jobs"},
		{func(c *Config) { c.MaxIOPIDs = -1 }, "max_io_pids"},
		{func(c *Config) { c.MaxOpenFiles = -1 }, "max_open_files"},
		{func(c *Config) { c.Rescan = sampler.Duration(time.Millisecond) }, "rescan"},
		{func(c *Config) { c.NodeName = "../x" }, "node_name"},
		{func(c *Config) { c.CgroupRoot = "" }, "cgroup_root"},
	} {
		c := DefaultConfig()
		tc.mod(c)
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Validate() = %v, want %q", *c, err, tc.want)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	for _, fx := range []string{"testdata/v1", "testdata/v2", "testdata/v2noslice"} {
		testutil.ZeroAllocs(t, "jobs", fx, nil)
	}
	if testutil.RaceEnabled {
		return
	}
	// Rescans of an unchanged tree allocate nothing either.
	cfg := DefaultConfig()
	cfg.Rescan = sampler.Duration(time.Second)
	p := newJobs(t, "testdata/v1", cfg)
	var b metric.Batch
	now := time.Unix(1700000000, 0)
	for range 3 {
		now = now.Add(time.Second)
		b.Reset(now)
		_ = p.Sample(context.Background(), now, &b)
	}
	if n := testing.AllocsPerRun(20, func() {
		now = now.Add(2 * time.Second)
		b.Reset(now)
		_ = p.Sample(context.Background(), now, &b)
	}); n != 0 {
		t.Errorf("allocs per tick with a rescan every tick = %v, want 0", n)
	}
}

// BenchmarkSample is the cost per job per tick on a node with 4 jobs
// (the v2 fixture plus two copies of its jobs; v1 likewise).
func BenchmarkSample(b *testing.B) {
	for _, fx := range []string{"v1", "v2"} {
		b.Run("layout="+fx+"/jobs=4", func(b *testing.B) {
			root := copyTree(b, "testdata/"+fx)
			addJobs(b, root, fx)
			p := newJobs(b, root, nil)
			var batch metric.Batch
			now := time.Unix(1700000000, 0)
			batch.Reset(now)
			if err := p.Sample(context.Background(), now, &batch); err != nil {
				b.Fatal(err)
			}
			if len(p.order) != 4 {
				b.Fatalf("%d jobs, want 4", len(p.order))
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
		})
	}
}

// BenchmarkPread is the yardstick for BenchmarkSample on a shared or
// virtual machine: one pread of a small fixture file kept open.
func BenchmarkPread(b *testing.B) {
	f, err := os.Open("testdata/v2/sys/fs/cgroup/system.slice/slurmstepd.scope/job_2001/cpu.stat")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.ReadAt(buf, 0); err != nil && err.Error() != "EOF" {
			b.Fatal(err)
		}
	}
}

// addJobs copies the fixture's two jobs to two more ids.
func addJobs(b *testing.B, root, fx string) {
	b.Helper()
	var pairs [][2]string
	if fx == "v1" {
		pairs = [][2]string{{"uid_1000/job_1001", "uid_1000/job_1003"}, {"uid_1001/job_1002", "uid_1001/job_1004"}}
		var out [][2]string
		for _, ctrl := range []string{"memory", "cpuacct", "cpuset", "freezer"} {
			for _, pr := range pairs {
				base := filepath.Join(root, "sys/fs/cgroup", ctrl, "slurm_cn01")
				out = append(out, [2]string{filepath.Join(base, pr[0]), filepath.Join(base, pr[1])})
			}
		}
		pairs = out
	} else {
		base := filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope")
		pairs = [][2]string{{base + "/job_2001", base + "/job_2003"}, {base + "/job_2002", base + "/job_2004"}}
	}
	for _, pr := range pairs {
		if _, err := os.Stat(pr[0]); err != nil {
			continue
		}
		if err := os.CopyFS(pr[1], os.DirFS(pr[0])); err != nil {
			b.Fatal(fmt.Errorf("copy %s: %w", pr[0], err))
		}
	}
}

// TestStepStartsV2: on cgroup v2 a new step is counted on the next tick,
// told by cgroup.stat's nr_descendants, without waiting for a rescan.
func TestStepStartsV2(t *testing.T) {
	root := copyTree(t, "testdata/v2")
	p := newJobs(t, root, nil)
	t0 := time.Unix(1700000000, 0)
	v := mustSample(t, p, t0)
	if v["vigil_job_processes 2002"] != 2 {
		t.Fatalf("processes = %v, want 2", v["vigil_job_processes 2002"])
	}
	job := filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_2002")
	write(t, filepath.Join(job, "step_1/user/task_0/cgroup.procs"), "9500\n9501\n")
	write(t, filepath.Join(job, "step_1/user/task_0/cgroup.threads"), "9500\n9501\n")
	v = mustSample(t, p, t0.Add(time.Second))
	if v["vigil_job_processes 2002"] != 2 {
		t.Fatalf("processes = %v before cgroup.stat changed, want 2 (no walk yet)", v["vigil_job_processes 2002"])
	}
	write(t, filepath.Join(job, "cgroup.stat"), "nr_descendants 8\nnr_dying_descendants 0\n")
	v = mustSample(t, p, t0.Add(2*time.Second))
	if v["vigil_job_processes 2002"] != 4 {
		t.Errorf("processes = %v after a step started, want 4", v["vigil_job_processes 2002"])
	}
}

// TestBadContent: a file that makes no sense is an error naming it; the
// job's other series and the other jobs are still reported.
func TestBadContent(t *testing.T) {
	root := copyTree(t, "testdata/v2")
	bad := filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_2001/memory.stat")
	write(t, bad, "anon lots\n")
	p := newJobs(t, root, nil)
	v, err := sample(t, p, time.Unix(1700000000, 0))
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v, want one naming %s", err, bad)
	}
	if _, ok := v["vigil_job_memory_used_bytes 2001"]; ok {
		t.Error("memory reported from a bad memory.stat")
	}
	if v["vigil_job_cpu_user_seconds_total 2001"] != 7200 || v["vigil_job_running 2002"] != 1 {
		t.Errorf("other series lost: cpu %v, job 2002 running %v", v["vigil_job_cpu_user_seconds_total 2001"], v["vigil_job_running 2002"])
	}
}

// TestHostileTree: a job with more task directories than maxLeaves and a
// tree nested deeper than Slurm makes are read within their bounds.
func TestHostileTree(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "sys/fs/cgroup/cgroup.controllers"), "cpu memory\n")
	job := filepath.Join(root, "sys/fs/cgroup/system.slice/slurmstepd.scope/job_9")
	for i := range maxLeaves + 100 {
		write(t, filepath.Join(job, "step_0/user", fmt.Sprintf("task_%d", i), "cgroup.procs"), "1\n")
	}
	deep := filepath.Join(job, "step_1")
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		deep = filepath.Join(deep, d)
		write(t, filepath.Join(deep, "cgroup.procs"), "2\n") // every cgroup has one
	}
	p := newJobs(t, root, nil)
	v := mustSample(t, p, time.Unix(1700000000, 0))
	if got := v["vigil_job_processes 9"]; got != maxLeaves {
		t.Errorf("processes = %v, want %d (leaves bounded; the deep one is cut at depth %d, not a leaf)", got, maxLeaves, maxDepth)
	}
}
