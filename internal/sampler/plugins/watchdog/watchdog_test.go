package watchdog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: an iTCO watchdog with every attribute and softdog with a few
// (the others are missing files: no series, empty info labels). No
// watchdog on the development VM: fixture-only.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "watchdog", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "watchdog", "testdata/basic", nil) }

func TestNoWatchdog(t *testing.T) { testutil.InitNotAvailable(t, "watchdog") }

// The info series follows a state change with a new descriptor.
func TestStateChange(t *testing.T) {
	f := testutil.NewFileFixture(t, "watchdog", "sys/class/watchdog/watchdog0/state", "inactive\n", nil)
	if got := string(testutil.Render(t, tick(t, f.P))); !contains(got, `state="inactive"`) {
		t.Fatalf("got %s", got)
	}
	f.Write("active\n")
	if got := string(testutil.Render(t, tick(t, f.P))); !contains(got, `state="active"`) {
		t.Fatalf("after the change: %s", got)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func tick(t *testing.T, p sampler.Plugin) *metric.Batch {
	t.Helper()
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "watchdog", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
