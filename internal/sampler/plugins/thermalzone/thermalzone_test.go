package thermalzone_test

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/thermalzone"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "thermal_zone", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "thermal_zone", "testdata/basic", nil) }

// TestNoThermal: without the hardware, Init says "not available" and the
// sampler leaves the plugin out, so it costs nothing per tick.
func TestNoThermal(t *testing.T) {
	reg, _ := sampler.Lookup("thermal_zone")
	p := reg.New(reg.NewConfig())
	err := p.Init(sampler.Env{FS: kernfs.NewFS(t.TempDir()), Logger: slog.New(slog.DiscardHandler), Stats: &sampler.Stats{}})
	if !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("Init err = %v, want ErrNotAvailable", err)
	}
}

func TestDefaultInterval(t *testing.T) {
	reg, _ := sampler.Lookup("thermal_zone")
	if got := time.Duration(reg.NewConfig().CommonConfig().Interval); got != thermalzone.DefaultInterval {
		t.Fatalf("interval %v", got)
	}
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
