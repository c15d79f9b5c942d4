package hwmon_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/hwmon"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: coretemp and nct6775 on the platform bus, an NVMe drive on PCI
// (all through class symlinks, as sysfs has them) and an ACPI zone without
// a device link.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "hwmon", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "hwmon", "testdata/basic", nil) }

// TestNoHwmon: without the hardware, Init says "not available" and the
// sampler leaves the plugin out, so it costs nothing per tick.
func TestNoHwmon(t *testing.T) {
	testutil.InitNotAvailable(t, "hwmon")
}

func TestExplode(t *testing.T) {
	for _, tc := range []struct {
		in        string
		ok        bool
		typ, prop string
		num       int
	}{
		{"temp1_input", true, "temp", "input", 1},
		{"power1_average_interval", true, "power", "average_interval", 1},
		{"beep_enable", true, "beep_enable", "", 0},
		{"in0", true, "in", "", 0},
		{"in0abc", false, "", "", 0},
		{"temp1_", false, "", "", 0},
		{"1abc", false, "", "", 0},
	} {
		ok, typ, num, prop := hwmon.Explode(tc.in)
		if ok != tc.ok || ok && (typ != tc.typ || num != tc.num || prop != tc.prop) {
			t.Errorf("Explode(%q) = %v %q %d %q", tc.in, ok, typ, num, prop)
		}
	}
}

func TestCleanName(t *testing.T) {
	for in, want := range map[string]string{"Package id 0\n": "package_id_0", "coretemp.0": "coretemp_0", "__X__": "x", "0000:05:00.0": "0000:05:00_0"} {
		if got := hwmon.CleanName(in); got != want {
			t.Errorf("CleanName(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "hwmon", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParseValue(f *testing.F) {
	f.Add([]byte("52000\n"))
	f.Add([]byte("-1.5"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = hwmon.ParseValue(data)
		_, _, _, _ = hwmon.Explode(string(data))
	})
}
