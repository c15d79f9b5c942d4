package timex_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/timex"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestGolden: a synchronised chrony host's answer (STA_PLL|STA_NANO) in
// node_exporter's units.
func TestGolden(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "timex", "/", nil)
	p.(*timex.Timex).SetRead(func(s *timex.State) {
		*s = timex.State{Return: 0, Offset: -12345, Freq: -1517390, Maxerror: 2500, Esterror: 120,
			Status: 0x2001, Constant: 7, Tick: 10000, Tai: 37}
	})
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "testdata/synced.txt", testutil.Render(t, &b))
}

func TestValues(t *testing.T) {
	var v [timex.NumMetrics]float64
	timex.Values(&timex.State{Return: 5, Offset: 1500, Status: 0x40, Freq: 65536}, &v)
	if v[0] != 0 {
		t.Errorf("TIME_ERROR gave sync_status %v", v[0])
	}
	if v[1] != 0.0015 { // µs without STA_NANO
		t.Errorf("offset %v, want 0.0015", v[1])
	}
	if v[2] != 1+1/1e6 {
		t.Errorf("frequency ratio %v", v[2])
	}
	timex.Values(&timex.State{Offset: 1500, Status: 0x2000}, &v)
	if v[0] != 1 || v[1] != 1.5e-6 {
		t.Errorf("STA_NANO: sync %v offset %v", v[0], v[1])
	}
}

// TestKernel: the real call answers with sane values.
func TestKernel(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "timex", "/", nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range b.Samples() {
		got[s.Desc.Name] = s.Value
	}
	if len(got) != timex.NumMetrics {
		t.Fatalf("%d series, want %d", len(got), timex.NumMetrics)
	}
	if tick := got["node_timex_tick_seconds"]; tick <= 0 || tick > 1 {
		t.Errorf("tick_seconds %v", tick)
	}
	if f := got["node_timex_frequency_adjustment_ratio"]; f < 0.99 || f > 1.01 {
		t.Errorf("frequency ratio %v", f)
	}
}

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "timex", "/", nil) }

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "timex", "/", nil)
	testutil.BenchTicks(b, p)
}

func FuzzValues(f *testing.F) {
	f.Add(int64(1), int64(2), int64(0x2000))
	f.Fuzz(func(t *testing.T, off, freq, status int64) {
		var v [timex.NumMetrics]float64
		timex.Values(&timex.State{Offset: off, Freq: freq, Status: status}, &v)
	})
}
