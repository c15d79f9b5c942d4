package conntrack_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/conntrack"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "conntrack", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "conntrack", "testdata/basic", nil) }

// TestNoModule: without nf_conntrack the plugin is "not available".
func TestNoModule(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "conntrack", t.TempDir(), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func TestParse(t *testing.T) {
	cols, err := conntrack.Columns([]byte("entries found invalid drop"))
	if err != nil {
		t.Fatal(err)
	}
	if cols[0] != 1 || cols[1] != 2 || cols[5] != 3 || cols[3] != -1 {
		t.Fatalf("columns %v", cols)
	}
	var sums [conntrack.NumStats]uint64
	if err := conntrack.Sum([]byte("1 a 2 3\n1 F 0 1\n"), &cols, &sums); err != nil || sums[0] != 25 || sums[5] != 4 {
		t.Fatalf("sums %v, %v", sums, err)
	}
	for _, bad := range []string{"1 2\n", "1 zz 2 3\n"} {
		if err := conntrack.Sum([]byte(bad), &cols, &sums); err == nil {
			t.Errorf("Sum(%q) accepted", bad)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "conntrack", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("entries found\n1 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cols, err := conntrack.Columns(data)
		if err != nil {
			return
		}
		var sums [conntrack.NumStats]uint64
		_ = conntrack.Sum(data, &cols, &sums)
	})
}

// TestModuleLoadsLater: a missing file is looked for again every 64 ticks
// (not every tick), so a module loaded after start-up is picked up.
func TestModuleLoadsLater(t *testing.T) {
	root := t.TempDir()
	p, _ := testutil.NewPlugin(t, "conntrack", root, nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = p.Sample(context.Background(), time.Now(), &b) }); n != 0 {
		t.Errorf("a missing module costs %v allocations a tick, want 0 (no open per tick)", n)
	}
	path := filepath.Join(root, filepath.FromSlash("proc/sys/net/netfilter/nf_conntrack_count"))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "nf_conntrack_max"), []byte("100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		b.Reset(time.Now())
		if err := p.Sample(context.Background(), time.Now(), &b); err == nil {
			for _, s := range b.Samples {
				if s.Desc.Name == "node_nf_conntrack_entries" {
					return
				}
			}
		}
	}
	t.Fatal("the file that appeared was not read within 64 ticks")
}
