package xfs_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/xfs"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: two file systems (one with the older seven-value vnodes line)
// next to the global stats directory, which is not a device. The
// development VM has the XFS module but no XFS mount: fixture-only.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "xfs", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "xfs", "testdata/basic", nil) }

func TestParseErrors(t *testing.T) {
	var v [len(xfs.Counters)]uint64
	for _, bad := range []string{"rw 1\n", "abt 1 2 3 4 5\n", "vnodes 1 2 3 4 5 6\n", "ig 1 2 3 4 5 6 x\n", "rw 1 4294967296\n"} {
		if err := xfs.Parse([]byte(bad), &v); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "xfs", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
