package bcache_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/bcache"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: one cache set with a backing and a cache device, human-readable
// sizes ("1.8M", "21.5M", "512k"), signed writeback terms; the register
// file is not a set. No bcache on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "bcache", nil) }

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "bcache", "testdata/basic", nil)
	testutil.ZeroAllocs(t, "bcache", "testdata/basic", &bcache.Config{PriorityStats: true})
}

func TestPriorityStats(t *testing.T) {
	unused, meta, err := bcache.PriorityStats([]byte("Unused:\t\t99%\nMetadata:\t3%\n"))
	if err != nil || unused != 99 || meta != 3 {
		t.Fatalf("got %d, %d, %v", unused, meta, err)
	}
}

func TestDehumanize(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "13": 13, "1.8M": 1_867_776, "512k": 524_288, "1.5k": 1524, "2G": 2 << 30, "1.0k": 1024, "7X": 0,
	} {
		if got, err := bcache.Dehumanize([]byte(in)); err != nil || got != want {
			t.Errorf("Dehumanize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "k", "x.5k", "1.xk"} {
		if _, err := bcache.Dehumanize([]byte(bad)); err == nil {
			t.Errorf("Dehumanize(%q) accepted", bad)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "bcache", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
