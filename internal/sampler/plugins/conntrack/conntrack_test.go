package conntrack_test

import (
	"context"
	"errors"
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
	testutil.FileAppearsLater(t, "conntrack", map[string]string{
		"proc/sys/net/netfilter/nf_conntrack_count": "7\n",
		"proc/sys/net/netfilter/nf_conntrack_max":   "100\n",
	}, "node_nf_conntrack_entries")
}
