package edac_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/edac"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "edac", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "edac", "testdata/basic", nil) }

// TestNoEDAC: without the hardware, Init says "not available" and the
// sampler leaves the plugin out, so it costs nothing per tick.
func TestNoEDAC(t *testing.T) {
	testutil.InitNotAvailable(t, "edac")
}

func TestParse(t *testing.T) {
	if v, err := edac.Parse([]byte("17\n")); err != nil || v != 17 {
		t.Fatalf("Parse = %d, %v", v, err)
	}
	for _, in := range []string{"", "-1", "x"} {
		if _, err := edac.Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "edac", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("3\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = edac.Parse(data) })
}
