package ingest

import (
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// sliceStore records the slices and up flag each AppendTick is given.
type sliceStore struct {
	nopStore
	descs  []*metric.Desc
	values []float64
	up     bool
}

func (s *sliceStore) AppendTick(_ string, _ time.Time, d []*metric.Desc, v []float64, up bool) error {
	s.descs, s.values, s.up = d, v, up
	return nil
}

// The handler passes a decoded tick to the store as it is, asking for
// up=1 alongside, instead of copying it to append up.
func TestTickPassesSlicesWithUp(t *testing.T) {
	st := &sliceStore{}
	h := New(st, time.Second, nil)
	descs := []*metric.Desc{metric.NewDesc("node_load1", "", metric.Gauge)}
	values := []float64{0.5}
	h.Tick("cn01", time.Now(), descs, values)
	if !st.up || len(st.descs) != 1 || &st.descs[0] != &descs[0] || &st.values[0] != &values[0] {
		t.Errorf("store got up=%v and %d descriptors, copied: %v", st.up, len(st.descs), len(st.descs) == 1 && &st.descs[0] != &descs[0])
	}
}
