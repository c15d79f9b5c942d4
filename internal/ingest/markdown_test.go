package ingest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// recStore records what ingest writes besides ticks.
type recStore struct {
	mu   sync.Mutex
	ups  []string
	gaps []string
}

func (r *recStore) AppendTick(string, time.Time, []*metric.Desc, []float64, bool) error { return nil }

func (r *recStore) SetUp(node string, t time.Time, up bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ups = append(r.ups, fmt.Sprintf("%s %v@%d", node, up, t.UnixMilli()))
	return nil
}

func (r *recStore) Gap(node string, from, to time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gaps = append(r.gaps, fmt.Sprintf("%s %d-%d", node, from.UnixMilli(), to.UnixMilli()))
	return nil
}

// A node reported down gets up=0 and its series stale-marked from just
// after its last tick; a node never seen, from 3 intervals back.
func TestMarkDownStaleFromLastTick(t *testing.T) {
	st := &recStore{}
	h := New(st, time.Second, quiet())
	t0 := time.Now().Truncate(time.Second)
	h.Tick("cn1", t0.Add(-time.Second), []*metric.Desc{load1}, []float64{1})
	h.Tick("cn1", t0, []*metric.Desc{load1}, []float64{1})
	h.Tick("cn1", t0.Add(-2*time.Second), []*metric.Desc{load1}, []float64{1}) // late, older
	down := t0.Add(5 * time.Second)
	h.NodeState("cn1", false, down)
	h.NodeState("cn2", false, down)
	h.NodeState("cn3", true, down) // its next tick writes up=1
	want := []string{
		fmt.Sprintf("cn1 %d-%d", t0.UnixMilli()+1, down.UnixMilli()),
		fmt.Sprintf("cn2 %d-%d", down.Add(-3*time.Second).UnixMilli()+1, down.UnixMilli()),
	}
	if fmt.Sprint(st.gaps) != fmt.Sprint(want) {
		t.Errorf("gaps %v, want %v", st.gaps, want)
	}
	wantUp := []string{fmt.Sprintf("cn1 false@%d", down.UnixMilli()), fmt.Sprintf("cn2 false@%d", down.UnixMilli())}
	if fmt.Sprint(st.ups) != fmt.Sprint(wantUp) {
		t.Errorf("up writes %v, want %v", st.ups, wantUp)
	}
	if got := h.Stats().NodesDown.Load(); got != 2 {
		t.Errorf("NodesDown = %d, want 2", got)
	}
}

type nopStore struct{}

func (nopStore) AppendTick(string, time.Time, []*metric.Desc, []float64, bool) error { return nil }
func (nopStore) SetUp(string, time.Time, bool) error                                 { return nil }
func (nopStore) Gap(string, time.Time, time.Time) error                              { return nil }

// An aggregator with thousands of children dies: every child goes down at
// once. One op marks all of them down.
func BenchmarkMarkDownAll(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprintf("children=%d", n), func(b *testing.B) {
			h := New(nopStore{}, time.Second, quiet())
			t0 := time.Now()
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("cn%05d", i)
				h.Liveness().Seen(names[i], t0, t0)
			}
			down := t0.Add(3 * time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for _, name := range names {
					h.NodeState(name, false, down)
				}
			}
		})
	}
}
