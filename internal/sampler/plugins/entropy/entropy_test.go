package entropy_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/entropy"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "entropy", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "entropy", "testdata/basic", nil) }

// TestNoPoolSize: without poolsize only the available bits are reported.
func TestNoPoolSize(t *testing.T) {
	f := testutil.NewFileFixture(t, "entropy", "proc/sys/kernel/random/entropy_avail", "256\n", nil)
	for i := 0; i < 2; i++ {
		var b metric.Batch
		if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Samples()) != 1 || b.Samples()[0].Value != 256 {
			t.Fatalf("tick %d: samples %+v", i, b.Samples())
		}
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]uint64{"256\n": 256, " 7 ": 7} {
		if got, err := entropy.Parse([]byte(in)); err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "-1", "x\n"} {
		if _, err := entropy.Parse([]byte(in)); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "entropy", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("256\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = entropy.Parse(data) })
}
