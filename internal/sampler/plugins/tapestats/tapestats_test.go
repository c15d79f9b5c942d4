package tapestats_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: st0 with every counter, st1 with a few (the others read as 0,
// one in hex), and the nst0 and st0a nodes, which are not drives. No tape
// on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "tapestats", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "tapestats", "testdata/basic", nil) }

func TestNoTape(t *testing.T) { testutil.InitNotAvailable(t, "tapestats") }

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "tapestats", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
