package fibrechannel_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/fibrechannel"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: an online port (hex counters, one unimplemented as all ones)
// and a port with the link down. No FC HBA on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "fibrechannel", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "fibrechannel", "testdata/basic", nil) }

func TestNoHBA(t *testing.T) { testutil.InitNotAvailable(t, "fibrechannel") }

func TestInterval(t *testing.T) {
	testutil.DefaultInterval(t, "fibrechannel", fibrechannel.DefaultInterval)
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "fibrechannel", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
