package mdadm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/mdadm"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: RAID6 with a bitmap, a degraded RAID1 recovering (one failed,
// one spare), RAID0, a RAID1 being checked, a RAID5 with a delayed resync
// and an inactive array.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "mdadm", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "mdadm", "testdata/basic", nil) }

func TestNoMD(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "mdadm", t.TempDir(), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		"md0 : active raid1 sda1[0]\n",                                                          // too few lines
		"md0 : active raid1 sda1[0]\n      x blocks [1/1] [U]\n\n\n",                            // size not a number
		"md0 : active raid1 sda1[0]\n      10 blocks super 1.2\n\n\n",                           // no counts
		"md0 : active raid1 sda1[0]\n      10 blocks [1/1] [U]\n      recovery = 1% (x/10)\n\n", // bad progress
		"md0\n\n\n\n",
	} {
		if err := mdadm.Parse([]byte(bad), func(mdadm.Array) {}); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "mdadm", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("md1 : active raid1 a[1] b[0](F)\n      9 blocks [2/1] [_U]\n      recovery = 1% (1/9)\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = mdadm.Parse(data, func(a mdadm.Array) {
			if a.State < 0 || a.State >= len(mdadm.States) {
				t.Fatalf("state %d", a.State)
			}
		})
	})
}

// TestModuleLoadsLater: a missing file is looked for again every 64 ticks
// (not every tick), so a module loaded after start-up is picked up.
func TestModuleLoadsLater(t *testing.T) {
	testutil.FileAppearsLater(t, "mdadm", map[string]string{"proc/mdstat": "md0 : active raid1 a[1] b[0]\n      9 blocks [2/2] [UU]\n\n\n"}, "node_md_blocks")
}
