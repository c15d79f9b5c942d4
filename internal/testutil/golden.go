// Package testutil has fixture and golden-file helpers for tests only.
package testutil

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

// Update rewrites golden files instead of comparing (go test -update).
var Update = flag.Bool("update", false, "rewrite golden files")

// Golden compares got with the file at path, or rewrites it under -update.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *Update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (rerun with -update if intended)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// Render formats a batch as /metrics would, with node="test".
func Render(t testing.TB, b *metric.Batch) []byte {
	t.Helper()
	tw := metric.TextWriter{ConstLabels: []metric.Label{{Name: "node", Value: "test"}}}
	var buf bytes.Buffer
	if err := tw.Write(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// NewPlugin builds and inits a registered plugin on a fixture root.
func NewPlugin(t testing.TB, name, root string, cfg sampler.Configurable) (sampler.Plugin, *sampler.Stats) {
	t.Helper()
	reg, ok := sampler.Lookup(name)
	if !ok {
		t.Fatalf("plugin %q not registered", name)
	}
	if cfg == nil {
		cfg = reg.NewConfig()
	}
	p := reg.New(cfg)
	stats := &sampler.Stats{}
	env := sampler.Env{FS: kernfs.NewFS(root), Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Stats: stats}
	if err := p.Init(env); err != nil {
		t.Fatalf("init %s on %s: %v", name, root, err)
	}
	return p, stats
}

// FixtureCases runs every directory under testdata/ that has a want.txt as
// a case: the plugin samples the directory as its root (twice, so plugins
// that need a previous reading get one) and the output is compared with
// want.txt.
func FixtureCases(t *testing.T, name string, cfg func() sampler.Configurable) {
	t.Helper()
	dirs, err := filepath.Glob("testdata/*/want.txt")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixture cases under testdata/*/want.txt")
	}
	for _, want := range dirs {
		dir := filepath.Dir(want)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var c sampler.Configurable
			if cfg != nil {
				c = cfg()
			}
			p, _ := NewPlugin(t, name, dir, c)
			var b metric.Batch
			now := time.Unix(1700000000, 0)
			for i := 0; i < 2; i++ {
				b.Reset(now)
				if err := p.Sample(context.Background(), now, &b); err != nil {
					t.Fatalf("sample: %v", err)
				}
			}
			Golden(t, want, Render(t, &b))
		})
	}
}

// AllocsPerTick measures heap allocations of one steady-state Sample call.
func AllocsPerTick(t testing.TB, p sampler.Plugin) float64 {
	t.Helper()
	var b metric.Batch
	now := time.Unix(1700000000, 0)
	ctx := context.Background()
	for i := 0; i < 3; i++ { // warm up caches and buffers
		b.Reset(now)
		_ = p.Sample(ctx, now, &b)
	}
	return testing.AllocsPerRun(50, func() {
		b.Reset(now)
		_ = p.Sample(ctx, now, &b)
	})
}

// ZeroAllocs fails t unless a steady-state tick of the named plugin on the
// fixture root allocates nothing (skipped under -race, where counts lie).
func ZeroAllocs(t *testing.T, name, root string, cfg sampler.Configurable) {
	t.Helper()
	if RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p, _ := NewPlugin(t, name, root, cfg)
	if n := AllocsPerTick(t, p); n != 0 {
		t.Errorf("%s on %s: allocs per tick = %v, want 0", name, root, n)
	}
}

// BenchTicks benchmarks steady-state ticks of p: one tick first (it creates
// descriptors, buffers and workers), then b.Loop ticks reusing one batch.
func BenchTicks(b *testing.B, p sampler.Plugin) {
	b.Helper()
	var batch metric.Batch
	ctx := context.Background()
	now := time.Unix(1700000000, 0)
	if err := p.Sample(ctx, now, &batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		batch.Reset(now)
		if err := p.Sample(ctx, now, &batch); err != nil {
			b.Fatal(err)
		}
	}
}

// FileFixture is a plugin on a temporary root that holds one kernel file,
// which a test rewrites between ticks.
type FileFixture struct {
	T    testing.TB
	Path string // the file, e.g. ROOT/proc/stat
	P    sampler.Plugin
}

// NewFileFixture writes content to rel (such as "proc/stat") under a new
// root and initialises plugin name on it (cfg nil: its defaults).
func NewFileFixture(t testing.TB, name, rel, content string, cfg sampler.Configurable) *FileFixture {
	t.Helper()
	root := t.TempDir()
	f := &FileFixture{T: t, Path: filepath.Join(root, filepath.FromSlash(rel))}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	f.Write(content)
	f.P, _ = NewPlugin(t, name, root, cfg)
	return f
}

// Write rewrites the file in place, as the kernel does, so the plugin's
// open descriptor sees the new content.
func (f *FileFixture) Write(content string) {
	f.T.Helper()
	if err := os.WriteFile(f.Path, []byte(content), 0o644); err != nil {
		f.T.Fatal(err)
	}
}
