package testutil

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

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
			for _, s := range b.Samples {
				if s.Desc.Name == want {
					return
				}
			}
		}
	}
	t.Fatalf("%s: the file that appeared was not read within 64 ticks", plugin)
}
