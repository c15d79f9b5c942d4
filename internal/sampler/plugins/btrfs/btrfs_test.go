package btrfs_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: a three-device RAID5/RAID1 file system and a one-device one
// without a label (dup metadata, a missing bytes_reserved reads as 0).
// The development VM has the module but no Btrfs file system.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "btrfs", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "btrfs", "testdata/basic", nil) }

func TestModuleLoadsLater(t *testing.T) {
	testutil.FileAppearsLater(t, "btrfs", map[string]string{
		"sys/fs/btrfs/1-2/devices/sda/size":                    "8\n",
		"sys/fs/btrfs/1-2/features/x":                          "1\n",
		"sys/fs/btrfs/1-2/allocation/data/single/total_bytes":  "4096\n",
		"sys/fs/btrfs/1-2/allocation/metadata/dup/total_bytes": "4096\n",
		"sys/fs/btrfs/1-2/allocation/system/dup/total_bytes":   "4096\n",
	}, "node_btrfs_device_size_bytes")
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "btrfs", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
