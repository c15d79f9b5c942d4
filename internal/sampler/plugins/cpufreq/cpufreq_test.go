package cpufreq_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/cpufreq"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: cpu0 with cpuinfo_cur_freq (readable as root), cpu1 without,
// cpu2 offline (no cpufreq directory).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "cpufreq", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "cpufreq", "testdata/basic", nil) }

// TestNoCpufreq: without the hardware, Init says "not available" and the
// sampler leaves the plugin out, so it costs nothing per tick.
func TestNoCpufreq(t *testing.T) {
	testutil.InitNotAvailable(t, "cpufreq")
}

func TestDefaultInterval(t *testing.T) {
	testutil.DefaultInterval(t, "cpufreq", cpufreq.DefaultInterval)
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
