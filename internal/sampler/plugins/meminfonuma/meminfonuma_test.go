package meminfonuma_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: two NUMA nodes (node0 as this VM's, node1 with made-up values,
// single-space separated), and the other entries of the directory.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "meminfo_numa", nil) }

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "meminfo_numa", "testdata/basic", nil)
}

func TestNoNUMA(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "meminfo_numa", t.TempDir(), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func TestOffByDefault(t *testing.T) {
	if r, _ := sampler.Lookup("meminfo_numa"); r.Default {
		t.Error("meminfo_numa runs by default; node_exporter has it off")
	}
}

// A malformed line is an error naming the file; the good lines are kept.
func TestBadLine(t *testing.T) {
	f := testutil.NewFileFixture(t, "meminfo_numa", "sys/devices/system/node/node3/meminfo",
		"Node 3 MemTotal: 100 kB\nNode 3 MemFree: x kB\nNode 3 Weird: 1 MB\n", nil)
	var b metric.Batch
	err := f.P.Sample(context.Background(), time.Now(), &b)
	if err == nil || b.Len() != 1 || b.Samples()[0].Value != 102400 || b.Samples()[0].Desc.Labels[0].Value != "3" {
		t.Fatalf("err %v, samples %v", err, b.Samples())
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "meminfo_numa", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
