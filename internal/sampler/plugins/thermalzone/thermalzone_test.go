package thermalzone_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/thermalzone"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "thermal_zone", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "thermal_zone", "testdata/basic", nil) }

// TestNoThermal: without the hardware, Init says "not available" and the
// sampler leaves the plugin out, so it costs nothing per tick.
func TestNoThermal(t *testing.T) {
	testutil.InitNotAvailable(t, "thermal_zone")
}

func TestDefaultInterval(t *testing.T) {
	testutil.DefaultInterval(t, "thermal_zone", thermalzone.DefaultInterval)
}

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{"52000\n": 52000, "-5000": -5000} {
		if v, err := thermalzone.Parse([]byte(in)); err != nil || v != want {
			t.Errorf("Parse(%q) = %d, %v", in, v, err)
		}
	}
	if _, err := thermalzone.Parse([]byte("hot")); err == nil {
		t.Error("accepted a word")
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "thermal_zone", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("52000\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = thermalzone.Parse(data) })
}
