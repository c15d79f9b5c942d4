package health_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/health"
	"github.com/vigil-hpc/vigil/internal/samplerd"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// load reads a vigil.toml and returns its [plugins.health].
func load(t testing.TB, path string) *health.Config {
	t.Helper()
	f, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return f.Plugins["health"].(*health.Config)
}

func parse(t testing.TB, toml string) (*health.Config, error) {
	t.Helper()
	f, err := config.Parse("vigil.toml", []byte(toml))
	if err != nil {
		return nil, err
	}
	return f.Plugins["health"].(*health.Config), nil
}

func start(t testing.TB, root string, cfg *health.Config) sampler.Plugin {
	t.Helper()
	p, _ := testutil.NewPlugin(t, "health", root, cfg)
	t.Cleanup(func() { _ = p.(*health.Plugin).Close() })
	return p
}

func sample(t testing.TB, p sampler.Plugin) string {
	t.Helper()
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	return string(testutil.Render(t, &b))
}

var durationRE = regexp.MustCompile(`(?m)^(vigil_health_check_duration_seconds\{[^}]*\}) .*$`)

// TestFixture: every check type that needs no program, on a fixture tree,
// as `vigil sample --once --root testdata/basic --config testdata/basic/vigil.toml
// --plugins health` prints it (durations blanked).
func TestFixture(t *testing.T) {
	p := start(t, "testdata/basic", load(t, "testdata/basic/vigil.toml"))
	sample(t, p)
	got := durationRE.ReplaceAllString(sample(t, p), "$1 DURATION")
	testutil.Golden(t, "testdata/basic/want.txt", []byte(got))
	if n := strings.Count(got, "vigil_health_check_ok{"); n != 20 {
		t.Errorf("%d checks reported, want 20", n)
	}
}

func TestZeroAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p := start(t, "testdata/basic", load(t, "testdata/basic/vigil.toml"))
	if n := testutil.AllocsPerTick(t, p); n != 0 {
		t.Errorf("allocs per tick = %v, want 0", n)
	}
}

func TestNoChecksNotAvailable(t *testing.T) { testutil.InitNotAvailable(t, "health") }

func TestDefaultReportInterval(t *testing.T) {
	testutil.DefaultInterval(t, "health", health.DefaultReport)
}

func TestConfigErrors(t *testing.T) {
	for toml, want := range map[string]string{
		"[plugins.health]\nconcurrency = 0\n":                                                       "concurrency must be between 1 and 64",
		"[plugins.health]\ninterval = \"100ms\"\n":                                                  "interval must be between 1s and 24h",
		"[[plugins.health.check]]\nname = \"x\"\ntype = \"bogus\"\n":                                `plugins.health: check[0] "x": type "bogus" unknown`,
		"[[plugins.health.check]]\nname = \"x\"\ntype = \"cpus\"\nexpected = \"4\"\npath = \"/\"\n": "path does not apply to type cpus",
		"[[plugins.health.check]]\nname = \"x\"\ntype = \"cpus\"\nexpectd = \"4\"\n":                `unknown key "plugins.health.check.expectd"`,
	} {
		_, err := parse(t, toml)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", toml, err, want)
		}
	}
}

// TestSampleConfigParses: the sample, uncommented, is a valid config.
func TestSampleConfigParses(t *testing.T) {
	data, err := os.ReadFile("sample.toml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "# "); ok && (strings.Contains(rest, " = ") || strings.HasPrefix(rest, "[")) {
			line = rest
		}
		out.WriteString(line + "\n")
	}
	cfg, err := parse(t, out.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(cfg.Check) != 7 {
		t.Fatalf("%d checks in the sample", len(cfg.Check))
	}
}

// TestFailureSeriesGoesAway: the failure series carries the reason while
// the check fails and is not sent once it passes.
func TestFailureSeriesGoesAway(t *testing.T) {
	root := t.TempDir()
	mi := filepath.Join(root, "proc", "self", "mountinfo")
	if err := os.MkdirAll(filepath.Dir(mi), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		if err := os.WriteFile(mi, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("22 1 259:2 / / rw,relatime - ext4 /dev/sda1 rw\n")
	cfg, err := parse(t, "[plugins.health]\ninterval = \"1s\"\n[[plugins.health.check]]\nname = \"scratch\"\ntype = \"mount\"\npath = \"/scratch\"\nread_write = true\n")
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, root, cfg)
	got := sample(t, p)
	for _, want := range []string{
		`vigil_health_check_ok{node="test",check="scratch"} 0`,
		`vigil_health_check_failure{node="test",check="scratch",reason="/scratch is not mounted"} 1`,
		`vigil_health_checks_failed_total{node="test",check="scratch"} 1`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %s in\n%s", want, got)
		}
	}
	write("22 1 259:2 / / rw,relatime - ext4 /dev/sda1 rw\n41 22 0:45 / /scratch ro,relatime - lustre fs:/scratch rw\n")
	waitFor(t, func() bool { return strings.Contains(sample(t, p), `reason="/scratch is mounted read-only"`) })
	write("22 1 259:2 / / rw,relatime - ext4 /dev/sda1 rw\n41 22 0:45 / /scratch rw,relatime - lustre fs:/scratch rw\n")
	waitFor(t, func() bool {
		return strings.Contains(sample(t, p), `vigil_health_check_ok{node="test",check="scratch"} 1`)
	})
	got = sample(t, p)
	if strings.Contains(got, "vigil_health_check_failure") || !strings.Contains(got, `vigil_health_checks_failed_total{node="test",check="scratch"} 2`) {
		t.Fatalf("after passing:\n%s", got)
	}
}

// TestSampleNeverWaits: a check slower than a tick does not hold the
// tick (only the very first tick waits, and that at most 2 s).
func TestSampleNeverWaits(t *testing.T) {
	cfg, err := parse(t, "[plugins.health]\ntimeout = \"4s\"\n[[plugins.health.check]]\nname = \"slow\"\ntype = \"command\"\ncommand = [\"sleep\", \"3\"]\n"+
		"[[plugins.health.check]]\nname = \"fast\"\ntype = \"cpus\"\nexpected = \"1\"\n")
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, "/", cfg)
	t0 := time.Now()
	got := sample(t, p)
	if took := time.Since(t0); took > 2500*time.Millisecond {
		t.Fatalf("first tick took %v", took)
	}
	if strings.Contains(got, `check="slow"`) || !strings.Contains(got, `vigil_health_check_ok{node="test",check="fast"}`) {
		t.Fatalf("first tick:\n%s", got)
	}
	for range 5 {
		t0 := time.Now()
		sample(t, p)
		if took := time.Since(t0); took > 100*time.Millisecond {
			t.Fatalf("tick took %v", took)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSampleOnce: `vigil sample --once --root testdata/basic --config
// testdata/basic/vigil.toml --plugins health`, as the command runs it.
func TestSampleOnce(t *testing.T) {
	f, err := config.Load("testdata/basic/vigil.toml")
	if err != nil {
		t.Fatal(err)
	}
	c := samplerd.OnceFromFile(f)
	c.Root, c.Node, c.Plugins = "testdata/basic", "cn042", []string{"health"}
	var out bytes.Buffer
	if err := samplerd.Once(context.Background(), c, slog.New(slog.DiscardHandler), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`vigil_health_check_ok{node="cn042",check="scratch"} 1`,
		`vigil_health_check_failure{node="cn042",check="home_rw",reason="/home is mounted read-only"} 1`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %s in\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "vigil_health_check_ok{"); n != 20 {
		t.Errorf("%d checks in the output, want 20", n)
	}
}
