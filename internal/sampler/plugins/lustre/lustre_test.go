package lustre_test

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/lustre"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// cases are the fixture trees (testdata/README.md) and the jobid_format
// their servers' job ids have.
var cases = map[string]string{"v2_12": "%j", "v2_15": "slurm.%j", "newer": "slurm.%j"}

func config(format string) *lustre.Config {
	c := lustre.DefaultConfig()
	c.JobIDFormat = format
	return c
}

// TestFixtures samples each tree twice and compares with its want.txt.
func TestFixtures(t *testing.T) {
	for name, format := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", name)
			p, _ := testutil.NewPlugin(t, "lustre", dir, config(format))
			var b metric.Batch
			now := time.Unix(1700000000, 0)
			for range 2 {
				b.Reset(now)
				if err := p.Sample(context.Background(), now, &b); err != nil {
					t.Fatalf("sample: %v", err)
				}
			}
			testutil.Golden(t, filepath.Join(dir, "want.txt"), testutil.Render(t, &b))
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	for name, format := range cases {
		t.Run(name, func(t *testing.T) {
			testutil.ZeroAllocs(t, "lustre", filepath.Join("testdata", name), config(format))
		})
	}
}

// A node where Lustre is loaded later: "not available" at no cost, then
// read within 64 ticks.
func TestModuleLoadsLater(t *testing.T) {
	testutil.FileAppearsLater(t, "lustre", map[string]string{
		"proc/fs/lustre/mdt/fs-MDT0000/md_stats": "snapshot_time             1700000000.1 secs.nsecs\nopen                      10 samples [reqs]\n",
	}, "lustre_stats_total")
}

func TestJobIDFormat(t *testing.T) {
	for _, tc := range []struct {
		format, id, want string
		ok               bool
	}{
		{"%j", "1234", "1234", true},
		{"%j", "dd.0", "", false},
		{"%j", "", "", false},
		{"slurm.%j", "slurm.77", "77", true},
		{"slurm.%j", "slurm.", "", false},
		{"slurm.%j", "lsf.77", "", false},
		{"%j.%u", "1234.0", "1234", true},
		{"%e.%j", "python3.8.1234", "1234", true},
		{"%e.%u.%j", "a.b.c.0.55", "55", true},
		{"%h:%j", "cn01.cluster:9", "9", true},
		{"100%%.%j", "100%.3", "3", true},
	} {
		f, err := lustre.ParseJobIDFormat(tc.format)
		if err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		got, ok := f.Match([]byte(tc.id))
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("%q on %q = %q, %v; want %q, %v", tc.format, tc.id, got, ok, tc.want, tc.ok)
		}
	}
	for _, bad := range []string{"", "slurm", "%j%j", "%j%u", "%q.%j", "%j%", "%e.%u.%h.%p.%j"} {
		if _, err := lustre.ParseJobIDFormat(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []func(*lustre.Config){
		func(c *lustre.Config) { c.MaxJobs = 0 },
		func(c *lustre.Config) { c.MaxJobSeries = -1 },
		func(c *lustre.Config) { c.JobIDFormat = "%x" },
	} {
		cfg := lustre.DefaultConfig()
		c(cfg)
		if cfg.Validate() == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if err := lustre.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// sample runs one tick and returns the series by rendered name (without
// the node label) and the error.
func sample(t *testing.T, p interface {
	Sample(context.Context, time.Time, *metric.Batch) error
}) (map[string]float64, error) {
	t.Helper()
	var b metric.Batch
	err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b)
	out := map[string]float64{}
	for i, d := range b.Descs {
		k := d.Name + "{"
		for j, l := range d.Labels {
			if j > 0 {
				k += ","
			}
			k += l.Name + "=" + l.Value
		}
		if _, dup := out[k+"}"]; dup {
			t.Errorf("series %s sent twice in one tick", k)
		}
		out[k+"}"] = b.Values[i]
	}
	return out, err
}

// The per-job series stop at max_job_series, the rest are counted, and
// entries beyond max_jobs are counted as untracked; the tick goes on.
func TestJobBounds(t *testing.T) {
	cfg := config("%j")
	cfg.MaxJobSeries = 30
	p, _ := testutil.NewPlugin(t, "lustre", "testdata/v2_12", cfg)
	got, err := sample(t, p)
	if err != nil {
		t.Fatal(err)
	}
	jobSeries := 0
	for k := range got {
		if strings.HasPrefix(k, "lustre_job_") {
			jobSeries++
		}
	}
	// v2_12 has 3 OST entries of 18 series and 2 MDT entries of 25.
	if jobSeries > 30 || jobSeries < 26 {
		t.Errorf("%d per-job series, want at most 30 (and the budget used)", jobSeries)
	}
	if cut := got["vigil_lustre_job_series_cut_total{}"]; cut != float64(3*18+2*25-jobSeries) {
		t.Errorf("cut %v, want %d", cut, 3*18+2*25-jobSeries)
	}
	if got["lustre_stats_total{component=ost,target=scratch-OST0000,operation=statfs}"] != 35359 {
		t.Errorf("the cap cut non-job series too")
	}

	cfg = config("%j")
	cfg.MaxJobs = 2
	p, _ = testutil.NewPlugin(t, "lustre", "testdata/v2_12", cfg)
	got, err = sample(t, p)
	if err != nil {
		t.Fatal(err)
	}
	if got["vigil_lustre_jobs{}"] != 2 || got["vigil_lustre_jobs_untracked{}"] != 3 {
		t.Errorf("jobs %v untracked %v, want 2 and 3", got["vigil_lustre_jobs{}"], got["vigil_lustre_jobs_untracked{}"])
	}
}

func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if d.Name() == "want.txt" {
			return nil
		}
		data, err := os.ReadFile(p)
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

// Targets that go away and come (an OST failing over, a client mount) are
// followed within 64 ticks, counted, and no tick fails; a job that leaves
// job_stats stops being sent at once.
func TestTargetsComeAndGo(t *testing.T) {
	root := copyTree(t, "testdata/v2_12")
	var logs testutil.SyncBuffer
	p := lustre.New(config("%j"))
	if err := p.Init(sampler.Env{FS: kernfs.NewFS(root), Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	if _, err := sample(t, p); err != nil {
		t.Fatal(err)
	}
	ost := filepath.Join(root, "proc/fs/lustre/obdfilter/scratch-OST0000")
	// the target's settings directory in /sys outlives it for a while
	if err := os.MkdirAll(filepath.Join(root, "sys/fs/lustre/obdfilter/scratch-OST0000"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(ost); err != nil {
		t.Fatal(err)
	}
	newOST := filepath.Join(root, "proc/fs/lustre/obdfilter/scratch-OST0007")
	os.MkdirAll(newOST, 0o755)
	os.WriteFile(filepath.Join(newOST, "stats"), []byte("snapshot_time 1.2 secs.nsecs\npunch                     5 samples [reqs]\n"), 0o644)
	// job 1043 leaves the MDT's job_stats
	mdtJobs := filepath.Join(root, "proc/fs/lustre/mdt/scratch-MDT0000/job_stats")
	data, _ := os.ReadFile(mdtJobs)
	os.WriteFile(mdtJobs, data[:strings.Index(string(data), "- job_id:          1043")], 0o644)
	got, err := sample(t, p)
	if err != nil {
		t.Fatal(err)
	}
	for k := range got {
		if strings.Contains(k, "target=scratch-MDT0000,jobid=1043") {
			t.Fatalf("job 1043 sent after it left job_stats: %s", k)
		}
	}
	for range 64 {
		if got, err = sample(t, p); err != nil {
			t.Fatalf("tick failed: %v", err)
		}
	}
	if got["lustre_stats_total{component=ost,target=scratch-OST0007,operation=punch}"] != 5 {
		t.Errorf("new target not read: %v", got)
	}
	for k := range got {
		if strings.Contains(k, "scratch-OST0000") && !strings.Contains(k, "osc") {
			t.Errorf("gone target still sent: %s", k)
		}
	}
	if got["vigil_lustre_targets_removed_total{}"] != 2 || got["vigil_lustre_targets_added_total{}"] != 10 {
		t.Errorf("removed %v added %v, want 2 and 10", got["vigil_lustre_targets_removed_total{}"], got["vigil_lustre_targets_added_total{}"])
	}
	// A file that turns bad mid-run: counted every tick, logged once.
	os.WriteFile(filepath.Join(newOST, "stats"), []byte("punch  x samples [reqs]\n"), 0o644)
	for range 5 {
		if _, err := sample(t, p); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "malformed"); n != 1 {
		t.Errorf("malformed logged %d times, want once:\n%s", n, logs.String())
	}
}

// BenchmarkTick: a steady-state tick on each fixture tree, beside the
// floor of only reading the same files (kernfs, no parsing).
func BenchmarkTick(b *testing.B) {
	for _, name := range []string{"v2_12", "v2_15"} {
		dir := filepath.Join("testdata", name)
		b.Run("tree="+name, func(b *testing.B) {
			p, _ := testutil.NewPlugin(b, "lustre", dir, config(cases[name]))
			testutil.BenchTicks(b, p)
		})
		b.Run("tree="+name+"/floor=read", func(b *testing.B) {
			var files []*kernfs.File
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && d.Name() != "want.txt" && d.Name() != "version" {
					files = append(files, kernfs.NewFile(p, 4096))
				}
				return nil
			})
			b.ReportAllocs()
			for b.Loop() {
				for _, f := range files {
					if _, err := f.Read(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// jobStatsTree writes an OSS whose OST's job_stats (2.15 format) holds
// jobs entries.
func jobStatsTree(tb testing.TB, jobs int) string {
	tb.Helper()
	data, err := os.ReadFile("testdata/v2_15/proc/fs/lustre/obdfilter/work-OST0001/job_stats")
	if err != nil {
		tb.Fatal(err)
	}
	s := string(data)
	first := s[strings.Index(s, "- job_id:"):strings.Index(s, "- job_id:          slurm.2002")]
	var out strings.Builder
	out.WriteString("job_stats:\n")
	for i := range jobs {
		out.WriteString(strings.Replace(first, "slurm.2001", "slurm."+strconv.Itoa(100000+i), 1))
	}
	root := tb.TempDir()
	dir := filepath.Join(root, "proc/fs/lustre/obdfilter/work-OST0001")
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "job_stats"), []byte(out.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return root
}

// BenchmarkJobStats: an OST's job_stats with many jobs (20 series each),
// the cost per job reported, beside the floor of reading the file.
func BenchmarkJobStats(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		root := jobStatsTree(b, n)
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			cfg := config("slurm.%j")
			cfg.MaxJobSeries = 1 << 20
			p, _ := testutil.NewPlugin(b, "lustre", root, cfg)
			testutil.BenchTicks(b, p)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/job")
		})
		b.Run(fmt.Sprintf("jobs=%d/floor=read", n), func(b *testing.B) {
			f := kernfs.NewFile(filepath.Join(root, "proc/fs/lustre/obdfilter/work-OST0001/job_stats"), 4096)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Read(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/job")
		})
	}
}

// Steady state with many jobs allocates nothing either.
func TestZeroAllocsManyJobs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	cfg := config("slurm.%j")
	cfg.MaxJobSeries = 1 << 20
	p, _ := testutil.NewPlugin(t, "lustre", jobStatsTree(t, 500), cfg)
	if n := testutil.AllocsPerTick(t, p); n != 0 {
		t.Errorf("allocs per tick = %v, want 0", n)
	}
}
