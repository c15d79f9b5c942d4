package schedstat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: version 15 format with domain lines, a sparse CPU number and a
// short cpu line (skipped).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "schedstat", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "schedstat", "testdata/basic", nil) }

// Kernels without CONFIG_SCHEDSTATS (this VM's) have no file.
func TestNoSchedstat(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "schedstat", t.TempDir(), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "schedstat", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
