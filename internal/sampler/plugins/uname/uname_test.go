package uname_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/uname"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "uname", nil) }

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "uname", "testdata/basic", nil)
	testutil.ZeroAllocs(t, "uname", "/", nil)
}

// TestHostnameChange: a renamed host gets a new series, not a stale label.
func TestHostnameChange(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "proc", "sys", "kernel")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"domainname", "arch", "osrelease", "ostype", "version"} {
		write(name, "x\n")
	}
	write("hostname", "a\n")
	p, _ := testutil.NewPlugin(t, "uname", root, nil)
	get := func() string {
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		return string(testutil.Render(t, &b))
	}
	if got := get(); !strings.Contains(got, `nodename="a"`) {
		t.Fatalf("got %s", got)
	}
	write("hostname", "b\n")
	if got := get(); !strings.Contains(got, `nodename="b"`) {
		t.Fatalf("after rename: %s", got)
	}
}

// TestRealRoot: on "/" the syscall path answers, with the kernel's values.
func TestRealRoot(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "uname", "/", nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Samples()) != 1 || b.Samples()[0].Value != 1 {
		t.Fatalf("samples %+v", b.Samples())
	}
	got := map[string]string{}
	for _, l := range b.Samples()[0].Desc.Labels {
		got[l.Name] = l.Value
	}
	if got["sysname"] != "Linux" || got["release"] == "" || got["machine"] == "" {
		t.Fatalf("labels %v", got)
	}
}

func TestValue(t *testing.T) {
	for in, want := range map[string]string{"x\n": "x", "": "", "a b\nc": "a b", "z\x00\x00": "z"} {
		if got := string(uname.Value([]byte(in))); got != want {
			t.Errorf("Value(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "uname", "/", nil)
	testutil.BenchTicks(b, p)
}

func FuzzValue(f *testing.F) {
	f.Add([]byte("6.1.0\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _ = uname.Value(data) })
}
