package cpufreq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/cpufreq"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: cpu0 with cpuinfo_cur_freq (readable as root), cpu1 without,
// cpu2 offline (no cpufreq directory).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "cpufreq", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "cpufreq", "testdata/basic", nil) }

func TestNoCpufreq(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "cpufreq", t.TempDir(), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func TestDefaultInterval(t *testing.T) {
	reg, _ := sampler.Lookup("cpufreq")
	if got := time.Duration(reg.NewConfig().CommonConfig().Interval); got != cpufreq.DefaultInterval {
		t.Fatalf("interval %v", got)
	}
}

func TestParseKHz(t *testing.T) {
	if v, err := cpufreq.ParseKHz([]byte("2400000\n")); err != nil || v != 2400000 {
		t.Fatalf("ParseKHz = %d, %v", v, err)
	}
	for _, in := range []string{"", "<unknown>", "-1"} {
		if _, err := cpufreq.ParseKHz([]byte(in)); err == nil {
			t.Errorf("ParseKHz(%q) accepted", in)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "cpufreq", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParseKHz(f *testing.F) {
	f.Add([]byte("2400000\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = cpufreq.ParseKHz(data) })
}
