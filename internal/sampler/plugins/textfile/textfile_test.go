package textfile_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/textfile"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// fixedMtime is given to fixture files, whose checkout time would
// otherwise leak into node_textfile_mtime_seconds.
var fixedMtime = time.Unix(1700000000, 0)

func config(dir string) *textfile.Config {
	reg, _ := sampler.Lookup("textfile")
	c := reg.NewConfig().(*textfile.Config)
	c.Directory = dir
	return c
}

func touchAll(t testing.TB, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		if err := os.Chtimes(f, fixedMtime, fixedMtime); err != nil {
			t.Fatal(err)
		}
	}
}

// Fixtures: basic has gauges, a counter, untyped values (-Inf, NaN),
// escapes, an empty label value, a histogram without and with +Inf, a
// summary, a family without HELP in two files and a file without the
// .prom suffix; errors has a good file next to a malformed one, one with
// timestamps and one with TYPE after samples.
func TestFixtures(t *testing.T) {
	wants, _ := filepath.Glob("testdata/*/want.txt")
	if len(wants) == 0 {
		t.Fatal("no fixtures")
	}
	for _, want := range wants {
		root := filepath.Dir(want)
		t.Run(filepath.Base(root), func(t *testing.T) {
			touchAll(t, filepath.Join(root, "textfile"))
			p, _ := testutil.NewPlugin(t, "textfile", root, config("textfile"))
			var b metric.Batch
			for i := 0; i < 2; i++ {
				b.Reset(fixedMtime)
				if err := p.Sample(context.Background(), fixedMtime, &b); err != nil {
					t.Fatal(err)
				}
			}
			testutil.Golden(t, want, testutil.Render(t, &b))
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "textfile", "testdata/basic", config("textfile"))
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "textfile", "testdata/basic", config("textfile"))
	testutil.BenchTicks(b, p)
}

// sample takes one tick and returns the series as "name{labels} value".
func sample(t *testing.T, p sampler.Plugin) map[string]float64 {
	t.Helper()
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, s := range b.Samples() {
		k := s.Desc.Name
		for _, l := range s.Desc.Labels {
			k += "," + l.Name + "=" + l.Value
		}
		if _, dup := out[k]; dup {
			t.Fatalf("series %s twice in one tick", k)
		}
		out[k] = s.Value
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	// write and rename, as the documentation asks of scripts
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestChanges: a replaced file is read again, a removed file loses its
// series and mtime, a file rewritten in place with a new size is noticed,
// and an unchanged file keeps its descriptors.
func TestChanges(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "tf")
	os.Mkdir(dir, 0o755)
	write(t, filepath.Join(dir, "a.prom"), "site_a 1\n")
	write(t, filepath.Join(dir, "b.prom"), "site_b{x=\"1\"} 2\n")
	p, _ := testutil.NewPlugin(t, "textfile", root, config("tf"))
	got := sample(t, p)
	if got["site_a"] != 1 || got["site_b,x=1"] != 2 || got["node_textfile_scrape_error"] != 0 {
		t.Fatalf("first tick: %v", got)
	}
	if _, ok := got["node_textfile_mtime_seconds,file="+filepath.Join("tf", "b.prom")]; !ok {
		t.Fatalf("no mtime for b.prom: %v", got)
	}
	write(t, filepath.Join(dir, "a.prom"), "site_a 5\n")
	os.Remove(filepath.Join(dir, "b.prom"))
	got = sample(t, p)
	if got["site_a"] != 5 {
		t.Errorf("site_a = %v after the rewrite, want 5", got["site_a"])
	}
	for k := range got {
		if strings.Contains(k, "site_b") || strings.Contains(k, "b.prom") {
			t.Errorf("%s still exported after b.prom was removed", k)
		}
	}
	// in place, same inode
	if err := os.WriteFile(filepath.Join(dir, "a.prom"), []byte("site_a 42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got = sample(t, p); got["site_a"] != 42 {
		t.Errorf("site_a = %v after an in-place write, want 42", got["site_a"])
	}
	var b1, b2 metric.Batch
	p.Sample(context.Background(), time.Now(), &b1)
	p.Sample(context.Background(), time.Now(), &b2)
	for i := range b1.Samples() {
		if b1.Samples()[i].Desc != b2.Samples()[i].Desc {
			t.Fatalf("descriptor of %s changed between unchanged ticks", b1.Samples()[i].Desc.Name)
		}
	}
}

// TestErrorsAndLimits: scrape_error is 1 for a missing directory, an
// oversized file, too many files or too many series, and the good files
// are still exported.
func TestErrorsAndLimits(t *testing.T) {
	t.Run("no directory configured", func(t *testing.T) {
		p, _ := testutil.NewPlugin(t, "textfile", t.TempDir(), config(""))
		got := sample(t, p)
		if len(got) != 1 || got["node_textfile_scrape_error"] != 0 {
			t.Errorf("got %v, want only node_textfile_scrape_error 0", got)
		}
	})
	t.Run("missing directory", func(t *testing.T) {
		p, _ := testutil.NewPlugin(t, "textfile", t.TempDir(), config("nope"))
		if got := sample(t, p); got["node_textfile_scrape_error"] != 1 {
			t.Errorf("got %v, want scrape error 1", got)
		}
	})
	root := t.TempDir()
	write(t, filepath.Join(root, "ok.prom"), "site_ok 1\n")
	write(t, filepath.Join(root, "big.prom"), "site_big 1\n"+strings.Repeat("# padding\n", 20))
	c := config("/")
	c.MaxFileBytes = 100
	p, _ := testutil.NewPlugin(t, "textfile", root, c)
	got := sample(t, p)
	if got["site_ok"] != 1 || got["node_textfile_scrape_error"] != 1 {
		t.Errorf("oversized file: %v", got)
	}
	if _, ok := got["site_big"]; ok {
		t.Error("oversized file exported")
	}
	if os.Remove(filepath.Join(root, "big.prom")); sample(t, p)["node_textfile_scrape_error"] != 0 {
		t.Error("scrape error stays after the oversized file went")
	}
	for i := 0; i < 5; i++ {
		write(t, filepath.Join(root, fmt.Sprintf("f%d.prom", i)), fmt.Sprintf("site_f%d 1\nsite_g%d 2\n", i, i))
	}
	c = config("/")
	c.MaxFiles, c.MaxSeries = 3, 100
	p, _ = testutil.NewPlugin(t, "textfile", root, c)
	got = sample(t, p)
	if n := count(got, "node_textfile_mtime_seconds"); n != 3 || got["node_textfile_scrape_error"] != 1 {
		t.Errorf("max_files 3: %d files read, scrape error %v", n, got["node_textfile_scrape_error"])
	}
	c = config("/")
	c.MaxSeries = 4
	p, _ = testutil.NewPlugin(t, "textfile", root, c)
	if got = sample(t, p); len(got) != 5 || got["node_textfile_scrape_error"] != 1 {
		t.Errorf("max_series 4: %d series (want 4 and the error), %v", len(got)-1, got)
	}
}

// A FIFO or directory named *.prom is an error, never a blocked tick.
func TestNotRegular(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "ok.prom"), "site_ok 1\n")
	if err := syscall.Mkfifo(filepath.Join(root, "pipe.prom"), 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	os.Mkdir(filepath.Join(root, "dir.prom"), 0o755)
	p, _ := testutil.NewPlugin(t, "textfile", root, config("/"))
	done := make(chan map[string]float64, 1)
	go func() {
		var b metric.Batch
		p.Sample(context.Background(), time.Now(), &b)
		m := map[string]float64{}
		for _, s := range b.Samples() {
			m[s.Desc.Name] += s.Value
		}
		done <- m
	}()
	select {
	case got := <-done:
		if got["site_ok"] != 1 || got["node_textfile_scrape_error"] != 1 || got["node_textfile_mtime_seconds"] == 0 {
			t.Errorf("got %v, want site_ok, one mtime and the scrape error", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO named .prom blocked the tick")
	}
}

func count(m map[string]float64, prefix string) int {
	n := 0
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		"site_x{a=\"b\" 1\n",
		"site_x{a=\"b\",a=\"c\"} 1\n",
		"site_x{__name__=\"y\"} 1\n",
		"site_x{a=b} 1\n",
		"site_x{a=\"\\q\"} 1\n",
		"site_x{a=\"\xff\"} 1\n",
		"site_x\n",
		"site_x one\n",
		"site_x 0x1p3\n",
		"site_x 1_000\n",
		"site_x 1 2 3\n",
		"site_x 1 abc\n",
		"1site 1\n",
		"site-x 1\n",
		"site_x 1\r\n",
		"# TYPE site_x gauge\n# TYPE site_x gauge\n",
		"# HELP site_x a\n# HELP site_x b\n",
		"site_x 1\n# TYPE site_x gauge\n",
		"# TYPE site_x frobnicator\n",
		"# HELP site_x bad \\q escape\n",
		"# TYPE site_h histogram\nsite_h_bucket 1\n",
		"# TYPE site_h histogram\nsite_h_bucket{le=\"x\"} 1\n",
		"# TYPE site_h histogram\nsite_h_count -1\n",
		"# TYPE site_s summary\nsite_s 1\n",
	} {
		if _, err := textfile.Parse([]byte(bad), textfile.Limits{}); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if _, err := textfile.Parse([]byte("a 1\nb 2\nc 3\n"), textfile.Limits{MaxSamples: 2}); err == nil {
		t.Error("MaxSamples not enforced")
	}
	if _, err := textfile.Parse([]byte(`a{a="1",b="2",c="3"} 1`), textfile.Limits{MaxLabels: 2}); err == nil {
		t.Error("MaxLabels not enforced")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"# HELP a x\n# TYPE a counter\na{b=\"c\"} 1\n",
		"# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 2\nh_count 1\n",
		"# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_count 2\n",
		"x 1 123\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fams, err := textfile.Parse(data, textfile.Limits{MaxSamples: 1000, MaxLabels: 16})
		if err != nil {
			return
		}
		for _, fam := range fams {
			if fam.Name == "" || len(fam.Metrics) == 0 {
				t.Fatalf("family %q with %d metrics", fam.Name, len(fam.Metrics))
			}
			for _, m := range fam.Metrics {
				if len(m.Labels) > 16 {
					t.Fatalf("%d labels", len(m.Labels))
				}
			}
		}
	})
}

// BenchmarkParse parses a file of 10,000 labelled gauges (about 600 KB),
// the cost of one change of a large file.
func BenchmarkParse(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("# HELP site_disk_smart_attr SMART attribute.\n# TYPE site_disk_smart_attr gauge\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&sb, "site_disk_smart_attr{disk=\"sd%d\",attr=\"a%d\",kind=\"raw\"} %d.5\n", i%100, i, i)
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := textfile.Parse(data, textfile.Limits{MaxSamples: 20000, MaxLabels: 64}); err != nil {
			b.Fatal(err)
		}
	}
}
