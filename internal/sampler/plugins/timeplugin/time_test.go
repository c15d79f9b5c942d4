package timeplugin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) {
	defer setLocal(time.UTC)()
	testutil.FixtureCases(t, "time", nil)
}

func setLocal(loc *time.Location) func() {
	old := time.Local
	time.Local = loc
	return func() { time.Local = old }
}

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "time", "testdata/basic", nil)
}

// TestZoneChange: a zone switch (DST) gives a series with the new name.
func TestZoneChange(t *testing.T) {
	defer setLocal(time.FixedZone("CET", 3600))()
	p, _ := testutil.NewPlugin(t, "time", "testdata/basic", nil)
	get := func() string {
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Unix(1700000000, 5e8), &b); err != nil {
			t.Fatal(err)
		}
		return string(testutil.Render(t, &b))
	}
	if got := get(); !strings.Contains(got, `node_time_zone_offset_seconds{node="test",time_zone="CET"} 3600`) ||
		!strings.Contains(got, "node_time_seconds{node=\"test\"} 1.7000000005e+09") {
		t.Fatalf("got %s", got)
	}
	time.Local = time.FixedZone("CEST", 7200)
	if got := get(); !strings.Contains(got, `time_zone="CEST"} 7200`) {
		t.Fatalf("after switch: %s", got)
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "time", "/", nil)
	testutil.BenchTicks(b, p)
}
