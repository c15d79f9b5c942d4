package powersupply_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/powersupply"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: an AC adapter and a laptop battery (µV, µW, µWh, tenths of a
// degree, a hex value, an empty string attribute). No power supply on the
// development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "powersupplyclass", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "powersupplyclass", "testdata/basic", nil) }

func TestNoPowerSupply(t *testing.T) { testutil.InitNotAvailable(t, "powersupplyclass") }

func TestInterval(t *testing.T) {
	testutil.DefaultInterval(t, "powersupplyclass", powersupply.DefaultInterval)
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "powersupplyclass", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
