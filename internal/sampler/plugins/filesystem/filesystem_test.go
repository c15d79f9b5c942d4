package filesystem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/filesystem"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// fakeFS are the statfs answers by mount point; other paths do not exist.
var fakeFS = map[string]syscall.Statfs_t{
	"/":                 {Bsize: 4096, Blocks: 66052000, Bfree: 62544000, Bavail: 59180000, Files: 16777216, Ffree: 16308344},
	"/scratch":          {Bsize: 4096, Blocks: 976754646, Bfree: 500000000, Bavail: 500000000, Files: 488378368, Ffree: 488000000},
	"/run":              {Bsize: 4096, Blocks: 400000, Bfree: 399000, Bavail: 399000, Files: 2000000, Ffree: 1999000},
	"/home/shared data": {Bsize: 1048576, Blocks: 1000000, Bfree: 250000, Bavail: 250000, Files: 50000000, Ffree: 40000000},
	"/lustre":           {Bsize: 4096, Blocks: 1 << 40, Bfree: 1 << 39, Bavail: 1 << 39, Files: 1 << 32, Ffree: 1 << 31},
	"/var/lib/docker":   {Bsize: 4096, Blocks: 1000, Bfree: 500, Bavail: 400, Files: 100, Ffree: 50},
}

// fakeStatfs answers from fakeFS for paths under root.
func fakeStatfs(root string) filesystem.StatfsFunc {
	return func(path string, st *syscall.Statfs_t) error {
		mp := "/" + strings.TrimPrefix(strings.TrimPrefix(path, root), "/")
		v, ok := fakeFS[mp]
		if !ok {
			return syscall.ENOENT // what syscall.Statfs returns, unwrapped
		}
		*st = v
		return nil
	}
}

func defaultConfig() filesystem.Config {
	reg, _ := sampler.Lookup("filesystem")
	return *reg.NewConfig().(*filesystem.Config)
}

func newPlugin(t testing.TB, root string, cfg filesystem.Config, statfs filesystem.StatfsFunc) *filesystem.Filesystem {
	t.Helper()
	p := filesystem.NewWithStatfs(cfg, statfs)
	env := sampler.Env{FS: kernfs.NewFS(root), Logger: slog.New(slog.DiscardHandler), Stats: &sampler.Stats{}}
	if err := p.Init(env); err != nil {
		t.Fatalf("init on %s: %v", root, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func sample(t testing.TB, p sampler.Plugin, now time.Time) *metric.Batch {
	t.Helper()
	var b metric.Batch
	b.Reset(now)
	if err := p.Sample(context.Background(), now, &b); err != nil {
		t.Fatalf("sample: %v", err)
	}
	return &b
}

// values maps "metric mountpoint" to the value, for the metrics tests check.
func values(b *metric.Batch) map[string]float64 {
	m := map[string]float64{}
	for _, s := range b.Samples() {
		m[strings.TrimPrefix(s.Desc.Name, "node_filesystem_")+" "+s.Desc.Labels[2].Value] = s.Value
	}
	return m
}

// TestFixtures is testutil.FixtureCases with the fake statfs injected.
func TestFixtures(t *testing.T) {
	wants, _ := filepath.Glob("testdata/*/want.txt")
	if len(wants) == 0 {
		t.Fatal("no fixture cases")
	}
	for _, want := range wants {
		dir := filepath.Dir(want)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			p := newPlugin(t, dir, defaultConfig(), fakeStatfs(dir))
			now := time.Unix(1700000000, 0)
			sample(t, p, now)
			testutil.Golden(t, want, testutil.Render(t, sample(t, p, now)))
		})
	}
}

func TestBadLine(t *testing.T) {
	p := newPlugin(t, "testdata/badline", defaultConfig(), fakeStatfs("testdata/badline"))
	var b metric.Batch
	err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b)
	want := `testdata/badline/proc/self/mountinfo: unexpected mountinfo format: line 2: no "-" separator`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	// The good lines are still reported.
	got := values(&b)
	if got["size_bytes /"] == 0 || got["size_bytes /scratch"] == 0 || len(got) != 14 {
		t.Errorf("want both good mounts reported, got %v", got)
	}
}

func TestNoMountTable(t *testing.T) {
	p := filesystem.New(defaultConfig())
	err := p.Init(sampler.Env{FS: kernfs.NewFS(t.TempDir())})
	if !errors.Is(err, sampler.ErrNotAvailable) || !strings.Contains(err.Error(), "proc/self/mountinfo") {
		t.Errorf("Init without mountinfo = %v, want ErrNotAvailable naming the file", err)
	}
}

// TestHungMount checks that a statfs that never returns costs a tick at
// most stat_timeout, is reported as a device error, and is not called
// again until it returns.
func TestHungMount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const root = "testdata/basic"
		release := make(chan struct{})
		var lustreCalls atomic.Int32
		fake := fakeStatfs(root)
		statfs := func(path string, st *syscall.Statfs_t) error {
			if strings.HasSuffix(path, "/lustre") {
				lustreCalls.Add(1)
				<-release // a dead Lustre server
			}
			return fake(path, st)
		}
		cfg := defaultConfig()
		cfg.StatTimeout = sampler.Duration(200 * time.Millisecond)
		p := newPlugin(t, root, cfg, statfs)

		start := time.Now()
		got := values(sample(t, p, start))
		if d := time.Since(start); d != 200*time.Millisecond {
			t.Errorf("first tick took %v, want stat_timeout (200ms)", d)
		}
		if got["device_error /lustre"] != 1 || got["device_error /scratch"] != 0 || got["size_bytes /scratch"] == 0 {
			t.Errorf("first tick: want /lustre device_error 1 and /scratch reported, got %v", got)
		}
		if _, ok := got["size_bytes /lustre"]; ok {
			t.Errorf("hung mount must report only device_error, got %v", got)
		}

		start = time.Now()
		got = values(sample(t, p, start))
		if d := time.Since(start); d != 0 {
			t.Errorf("second tick waited %v for the hung mount", d)
		}
		if got["device_error /lustre"] != 1 || lustreCalls.Load() != 1 {
			t.Errorf("second tick: device_error %v, statfs calls %d; want 1 and 1", got["device_error /lustre"], lustreCalls.Load())
		}

		close(release)
		synctest.Wait()
		got = values(sample(t, p, time.Now()))
		if got["device_error /lustre"] != 0 || got["size_bytes /lustre"] != float64(1<<52) || lustreCalls.Load() != 2 {
			t.Errorf("after release: device_error %v size %v calls %d", got["device_error /lustre"], got["size_bytes /lustre"], lustreCalls.Load())
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
}

// TestContextCancel: a cancelled tick returns at once.
func TestContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		p := newPlugin(t, "testdata/self", defaultConfig(), func(string, *syscall.Statfs_t) error { <-release; return nil })
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		var b metric.Batch
		if err := p.Sample(ctx, start, &b); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 0 || b.Len() != 1 {
			t.Errorf("cancelled tick took %v with %d samples, want 0s and 1 device_error", d, b.Len())
		}
		close(release)
		p.Close()
	})
}

func writeMountinfo(t *testing.T, root string, mps ...string) {
	t.Helper()
	var sb strings.Builder
	for i, mp := range mps {
		fmt.Fprintf(&sb, "%d 1 0:%d / %s rw,relatime - ext4 /dev/x%d rw\n", 100+i, 50+i, mp, i)
	}
	path := filepath.Join(root, "proc", "self", "mountinfo")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mountPoints(b *metric.Batch) string {
	var mps []string
	for _, s := range b.Samples() {
		if s.Desc.Name == "node_filesystem_device_error" {
			mps = append(mps, s.Desc.Labels[2].Value)
		}
	}
	return strings.Join(mps, ",")
}

// TestMountTableChanges: mounts appear and go with the table, on the
// refresh schedule; a hung mount that was unmounted keeps its one worker
// until its call returns.
func TestMountTableChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		writeMountinfo(t, root, "/a", "/b")
		release := make(chan struct{})
		var cCalls atomic.Int32
		p := newPlugin(t, root, defaultConfig(), func(path string, st *syscall.Statfs_t) error {
			if strings.HasSuffix(path, "/c") {
				cCalls.Add(1)
				<-release
			}
			*st = syscall.Statfs_t{Bsize: 1, Blocks: 1}
			return nil
		})
		t0 := time.Now()
		steps := []struct {
			at      time.Duration
			table   []string // written before the tick; nil = unchanged
			want    string
			workers int
		}{
			{at: 0, want: "/a,/b", workers: 2},
			{at: time.Second, table: []string{"/a", "/c"}, want: "/a,/b", workers: 2}, // not refreshed yet
			{at: 10 * time.Second, want: "/a,/c", workers: 2},                         // /c hangs
			{at: 20 * time.Second, table: []string{"/a"}, want: "/a", workers: 2},     // /c unmounted, call still out
			{at: 30 * time.Second, table: []string{"/a", "/c"}, want: "/a,/c", workers: 2},
		}
		for i, s := range steps {
			if s.table != nil {
				writeMountinfo(t, root, s.table...)
			}
			time.Sleep(time.Until(t0.Add(s.at)))
			b := sample(t, p, time.Now())
			if got := mountPoints(b); got != s.want || p.Workers() != s.workers {
				t.Errorf("step %d: mounts %q workers %d, want %q and %d", i, got, p.Workers(), s.want, s.workers)
			}
		}
		if n := cCalls.Load(); n != 1 {
			t.Errorf("statfs(/c) called %d times while hung, want 1", n)
		}
		writeMountinfo(t, root, "/a")
		time.Sleep(10 * time.Second)
		close(release)
		synctest.Wait()
		sample(t, p, time.Now()) // refreshes: /c goes
		sample(t, p, time.Now()) // collects /c's answer: its worker goes
		if p.Workers() != 1 {
			t.Errorf("workers after /c returned and left: %d, want 1", p.Workers())
		}
		p.Close()
	})
}

func TestMaxMounts(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxMounts = 2
	p := newPlugin(t, "testdata/basic", cfg, fakeStatfs("testdata/basic"))
	var b metric.Batch
	err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b)
	if err == nil || !strings.Contains(err.Error(), "max_mounts=2") {
		t.Errorf("err = %v, want max_mounts error", err)
	}
	if got := mountPoints(&b); got != "/,/run" {
		t.Errorf("mounts %q, want the first two", got)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		edit    func(c *filesystem.Config)
		wantErr string
	}{
		{edit: func(c *filesystem.Config) {}},
		{edit: func(c *filesystem.Config) { c.MountPointsExclude = "(" }, wantErr: "mount_points_exclude"},
		{edit: func(c *filesystem.Config) { c.FSTypesExclude = "[" }, wantErr: "fs_types_exclude"},
		{edit: func(c *filesystem.Config) { c.MountRefresh = 0 }, wantErr: "mount_refresh"},
		{edit: func(c *filesystem.Config) { c.StatTimeout = 0 }, wantErr: "stat_timeout must be positive"},
		{edit: func(c *filesystem.Config) { c.Interval = sampler.Duration(100 * time.Millisecond) }, wantErr: "shorter than interval"},
		{edit: func(c *filesystem.Config) { c.MaxMounts = 0 }, wantErr: "max_mounts"},
	} {
		c := defaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", c, err, tc.wantErr)
		}
	}
}

// TestRealSystem runs the real statfs on this machine's mounts.
func TestRealSystem(t *testing.T) {
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo")
	}
	p := newPlugin(t, "/", defaultConfig(), syscall.Statfs)
	p2 := filesystem.New(defaultConfig()) // the registered constructor's statfs
	if err := p2.Init(sampler.Env{FS: kernfs.NewFS("/")}); err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	for _, pl := range []sampler.Plugin{p, p2} {
		b := sample(t, pl, time.Now())
		for _, s := range b.Samples() {
			if s.Value < 0 {
				t.Errorf("%s%v = %v", s.Desc.Name, s.Desc.Labels, s.Value)
			}
		}
	}
}

func TestParseMountinfo(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // "source fstype mountpoint ro;" per mount, escaped
		wantErr  string
	}{
		{name: "empty"},
		{name: "proc(5) example", in: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n",
			want: "/dev/root ext3 /mnt2 false;"},
		{name: "no optional fields, no newline", in: "1 0 8:1 / / rw - ext4 /dev/sda1 rw",
			want: "/dev/sda1 ext4 / false;"},
		{name: "several optional fields", in: "1 0 8:1 / /x rw shared:1 master:2 propagate_from:3 unbindable - xfs /dev/b rw\n",
			want: "/dev/b xfs /x false;"},
		{name: "read-only mount", in: "1 0 8:1 / /x ro,relatime - xfs /dev/b rw\n", want: "/dev/b xfs /x true;"},
		{name: "read-only super block", in: "1 0 8:1 / /x rw - xfs /dev/b rw,ro\n", want: "/dev/b xfs /x true;"},
		{name: "option containing ro", in: "1 0 8:1 / /x rw,rootcontext - xfs /dev/b errors=remount-ro\n", want: "/dev/b xfs /x false;"},
		{name: "escapes kept", in: `1 0 8:1 / /a\040b rw - nfs srv:/a\040b rw` + "\n", want: `srv:/a\040b nfs /a\040b false;`},
		{name: "bad line skipped", in: "1 0 8:1 / /x rw xfs /dev/b rw\n2 0 8:2 / /y rw - xfs /dev/c rw\n",
			want: "/dev/c xfs /y false;", wantErr: `line 1: no "-" separator`},
		{name: "short line", in: "1 0 8:1 /\n", wantErr: "line 1: 4 fields before the optional ones"},
		{name: "bad id", in: "x 0 8:1 / / rw - ext4 /dev/a rw\n", wantErr: `mount id "x"`},
		{name: "bad dev", in: "1 0 81 / / rw - ext4 /dev/a rw\n", wantErr: `device number "81"`},
		{name: "nothing after separator", in: "1 0 8:1 / / rw - ext4\n", wantErr: "1 fields after the separator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			err := filesystem.ParseMountinfo([]byte(tc.in), func(mi filesystem.Mountinfo) {
				fmt.Fprintf(&sb, "%s %s %s %v;", mi.Source, mi.FSType, mi.MountPoint, mi.ReadOnly)
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, filesystem.ErrFormat) {
					t.Errorf("err = %v, want ErrFormat containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Errorf("err = %v", err)
			}
			if sb.String() != tc.want {
				t.Errorf("got %q, want %q", sb.String(), tc.want)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		`/a\040b`:          "/a b",
		`\011tab\012nl`:    "\ttab\nnl",
		`back\134slash`:    `back\slash`,
		`\04`:              `\04`,
		`\400`:             `\400`, // not a byte
		`\08x`:             `\08x`,
		`\\040`:            `\ `,
		`/plain/path/here`: "/plain/path/here",
	} {
		if got := string(filesystem.Unescape([]byte("x"), []byte(in))); got != "x"+want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, "x"+want)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p := newPlugin(t, "testdata/basic", defaultConfig(), fakeStatfs("testdata/basic"))
	if n := testutil.AllocsPerTick(t, p); n != 0 {
		t.Errorf("allocs per tick = %v, want 0", n)
	}
	// Also when every tick re-reads an unchanged mount table.
	cfg := defaultConfig()
	cfg.MountRefresh = sampler.Duration(time.Nanosecond)
	p = newPlugin(t, "testdata/basic", cfg, fakeStatfs("testdata/basic"))
	var b metric.Batch
	now := time.Unix(1700000000, 0)
	ctx := context.Background()
	n := testing.AllocsPerRun(50, func() {
		now = now.Add(time.Second)
		b.Reset(now)
		if err := p.Sample(ctx, now, &b); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("allocs per tick with refresh = %v, want 0", n)
	}
}

func BenchmarkSample(b *testing.B) {
	for _, n := range []int{8, 128, 1024} {
		b.Run(fmt.Sprintf("mounts=%d", n), func(b *testing.B) {
			root := b.TempDir()
			var sb strings.Builder
			for i := range n {
				fmt.Fprintf(&sb, "%d 1 0:%d / /mnt/m%d rw,relatime shared:1 - nfs4 srv:/export/%d rw,vers=4.2\n", 100+i, 50+i, i, i)
			}
			path := filepath.Join(root, "proc", "self", "mountinfo")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
				b.Fatal(err)
			}
			p := newPlugin(b, root, defaultConfig(), func(_ string, st *syscall.Statfs_t) error {
				*st = syscall.Statfs_t{Bsize: 4096, Blocks: 100, Bfree: 50, Bavail: 40, Files: 10, Ffree: 5}
				return nil
			})
			testutil.BenchTicks(b, p)
		})
	}
}

func BenchmarkParseMountinfo(b *testing.B) {
	data, err := os.ReadFile("testdata/basic/proc/1/mountinfo")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := filesystem.ParseMountinfo(data, func(filesystem.Mountinfo) { n++ }); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"))
	f.Add([]byte(`1 0 8:1 / /a\040b ro - nfs srv:/a\134b rw` + "\n1 0 8:1 /\n"))
	f.Add([]byte("1 0 8:1 / / rw -"))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := filesystem.ParseMountinfo(data, func(mi filesystem.Mountinfo) {
			if len(mi.MountPoint) == 0 || len(mi.FSType) == 0 || len(mi.Source) == 0 {
				t.Fatalf("empty field in %+v", mi)
			}
			if u := filesystem.Unescape(nil, mi.MountPoint); len(u) > len(mi.MountPoint) {
				t.Fatalf("Unescape grew %q to %q", mi.MountPoint, u)
			}
		})
		if err != nil && !errors.Is(err, filesystem.ErrFormat) {
			t.Fatalf("error %v does not wrap ErrFormat", err)
		}
	})
}

func TestConfigFile(t *testing.T) {
	f, err := config.Parse("vigil.toml", []byte("[plugins.filesystem]\nstat_timeout = \"200ms\"\nmount_refresh = \"1m\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Plugins["filesystem"].(*filesystem.Config)
	if c.StatTimeout.D() != 200*time.Millisecond || c.MountRefresh.D() != time.Minute || c.FSTypesExclude != filesystem.DefaultFSTypesExclude {
		t.Errorf("decoded %+v", c)
	}
	_, err = config.Parse("vigil.toml", []byte("[plugins.filesystem]\ninterval = \"100ms\"\n"))
	if err == nil || !strings.Contains(err.Error(), "plugins.filesystem: stat_timeout 500ms must be shorter than interval 100ms") {
		t.Errorf("stat_timeout >= interval: err = %v", err)
	}
}
