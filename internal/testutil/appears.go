package testutil

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

// FileAppearsLater checks a plugin whose source file is missing at start
// (a kernel module not yet loaded): it reports ErrNotAvailable without
// allocating, so it does not open the file every tick, and once files
// (paths under the root, "/"-separated, to content) appear it reports
// metric want within 64 ticks.
func FileAppearsLater(t *testing.T, plugin string, files map[string]string, want string) {
	t.Helper()
	root := t.TempDir()
	p, _ := NewPlugin(t, plugin, root, nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = p.Sample(context.Background(), time.Now(), &b) }); n != 0 {
		t.Errorf("a missing file costs %v allocations a tick, want 0 (no open per tick)", n)
	}
	for rel, content := range files {
		path := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for range 64 {
		b.Reset(time.Now())
		if err := p.Sample(context.Background(), time.Now(), &b); err == nil {
			for _, d := range b.Descs {
				if d.Name == want {
					return
				}
			}
		}
	}
	t.Fatalf("%s: the file that appeared was not read within 64 ticks", plugin)
}

// InitNotAvailable checks that plugin, on a root without its hardware,
// says ErrNotAvailable from Init, so the sampler leaves it out.
func InitNotAvailable(t *testing.T, plugin string) {
	t.Helper()
	reg, ok := sampler.Lookup(plugin)
	if !ok {
		t.Fatalf("plugin %q not registered", plugin)
	}
	p := reg.New(reg.NewConfig())
	err := p.Init(sampler.Env{FS: kernfs.NewFS(t.TempDir()), Logger: slog.New(slog.DiscardHandler), Stats: &sampler.Stats{}})
	if !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("Init err = %v, want ErrNotAvailable", err)
	}
}

// DefaultInterval checks that plugin's default config carries want.
func DefaultInterval(t *testing.T, plugin string, want time.Duration) {
	t.Helper()
	reg, ok := sampler.Lookup(plugin)
	if !ok {
		t.Fatalf("plugin %q not registered", plugin)
	}
	if got := time.Duration(reg.NewConfig().CommonConfig().Interval); got != want {
		t.Fatalf("%s default interval %v, want %v", plugin, got, want)
	}
}
