package simulate

import (
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func TestRaplRisesWithLoad(t *testing.T) {
	d := newRaplDescs()
	var idle, busy rapl
	var b metric.Batch
	prev := -1.0
	for range 10 {
		b.Reset(time.Time{})
		idle.step(d, 0.01, time.Second, &b)
		if v := b.Values[0]; v <= prev {
			t.Fatalf("package counter did not rise: %v after %v", v, prev)
		} else {
			prev = v
		}
		busy.step(d, 0.97, time.Second, &b)
	}
	if busy.pkg[0] < 2*idle.pkg[0] || busy.dram <= idle.dram {
		t.Fatalf("busy node's energy %v/%v does not track load over idle %v/%v", busy.pkg[0], busy.dram, idle.pkg[0], idle.dram)
	}
}
