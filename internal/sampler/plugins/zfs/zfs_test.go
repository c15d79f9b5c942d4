package zfs_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: arcstats (with an int64 line), zil, fm (names with "-"),
// dmu_tx; pool tank with the io kstat and two datasets, pool scratch
// degraded without io (OpenZFS 2.x). No ZFS on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "zfs", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "zfs", "testdata/basic", nil) }

func TestModuleLoadsLater(t *testing.T) {
	testutil.FileAppearsLater(t, "zfs", map[string]string{
		"proc/spl/kstat/zfs/zil": "1 1 0x01 1 1 1 1\nname type data\nzil_commit_count 4 3\n",
	}, "node_zfs_zil_zil_commit_count")
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "zfs", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
