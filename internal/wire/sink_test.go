package wire_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Every scheduler group gets a stream of its own, however many groups
// there are: with twelve groups ticking in turn, each tick arrives with its
// own group's series and values, and each group's schema goes out once.
func TestSinkStreamPerGroupBeyondEight(t *testing.T) {
	srv := startServer(t, "", nil)
	c := startClient(t, wire.ClientOptions{Addrs: []string{srv.addr}, Name: "cn00007"})
	const groups, ticks = 12, 5
	newGroup := c.Sink("cn00007")
	sinks := make([]func(*metric.Batch), groups)
	descs := make([][]*metric.Desc, groups)
	for g := range groups {
		sinks[g] = newGroup(g)
		for k := range g%3 + 1 { // some groups share a length, none its series
			descs[g] = append(descs[g], metric.NewDesc(fmt.Sprintf("group%d_value", g), "", metric.Gauge, "k", fmt.Sprint(k)))
		}
	}
	t0 := time.Unix(1_763_800_000, 0)
	for i := range ticks {
		for g := range groups {
			var b metric.Batch
			b.Reset(t0.Add(time.Duration(i) * time.Second))
			for k, d := range descs[g] {
				b.Add(d, float64(1000*g+10*i+k))
			}
			sinks[g](&b)
		}
	}
	waitFor(t, "every tick", func() bool { return srv.rec.tickCount() == groups*ticks })
	srv.rec.mu.Lock()
	defer srv.rec.mu.Unlock()
	if srv.rec.schemas != groups {
		t.Errorf("%d schemas for %d steady groups ticking in turn, want %d", srv.rec.schemas, groups, groups)
	}
	for j, tk := range srv.rec.ticks {
		i, g := j/groups, j%groups
		if len(tk.descs) != len(descs[g]) {
			t.Fatalf("tick %d of group %d: %d series, want %d", i, g, len(tk.descs), len(descs[g]))
		}
		for k, d := range tk.descs {
			if d.Name != descs[g][k].Name || tk.values[k] != float64(1000*g+10*i+k) {
				t.Fatalf("tick %d of group %d: series %d = %s %v, want %s %v", i, g, k,
					d.Name, tk.values[k], descs[g][k].Name, float64(1000*g+10*i+k))
			}
		}
	}
}
