package nvme_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: two controllers, one resetting, with the padded model and
// serial strings drivers write; nvme0's cntlid file gives no label, as in
// node_exporter 1.5. No NVMe on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "nvme", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "nvme", "testdata/basic", nil) }

func TestNoNVMe(t *testing.T) { testutil.InitNotAvailable(t, "nvme") }

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "nvme", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
