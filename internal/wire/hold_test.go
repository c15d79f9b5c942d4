package wire

import (
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// TestHoldReleasesInOrder: with Hold, a tick queued ahead of its time is
// not handed to the connection until Release passes its timestamp, and
// frames queued after it wait behind it; without Hold ticks go at once.
func TestHoldReleasesInOrder(t *testing.T) {
	d := metric.NewDesc("x", "x", metric.Gauge)
	t0 := time.Unix(1000, 0)
	c, err := NewClient(ClientOptions{Addrs: []string{"127.0.0.1:1"}, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	cs := c.NewStream("cn1")
	c.Tick(cs, t0, []*metric.Desc{d}, []float64{1})
	c.Tick(cs, t0.Add(time.Second), []*metric.Desc{d}, []float64{2})
	c.Gap("cn2", t0, t0) // a node-level frame behind the held tick
	if w := c.collect(nil, 1<<20); len(w) != 0 {
		t.Fatalf("collected %d bytes before any release", len(w))
	}
	c.Release(t0.Add(-time.Millisecond))
	if w := c.collect(nil, 1<<20); len(w) != 0 {
		t.Fatalf("collected %d bytes released up to before the first tick", len(w))
	}
	c.Release(t0)
	first := c.collect(nil, 1<<20)
	if len(first) == 0 {
		t.Fatal("nothing collected after releasing the first tick")
	}
	if w := c.collect(nil, 1<<20); len(w) != 0 {
		t.Fatalf("the second tick (and the gap behind it) went %d bytes before its time", len(w))
	}
	c.Release(t0.Add(-time.Hour)) // never goes back
	if w := c.collect(nil, 1<<20); len(w) != 0 {
		t.Fatalf("collected %d bytes after an earlier release", len(w))
	}
	c.Release(t0.Add(time.Second))
	rest := c.collect(nil, 1<<20)

	// The same frames without Hold, collected at once.
	u, err := NewClient(ClientOptions{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	us := u.NewStream("cn1")
	u.Tick(us, t0, []*metric.Desc{d}, []float64{1})
	u.Tick(us, t0.Add(time.Second), []*metric.Desc{d}, []float64{2})
	u.Gap("cn2", t0, t0)
	all := u.collect(nil, 1<<20)
	if got := string(first) + string(rest); got != string(all) {
		t.Fatalf("held frames differ from unheld ones:\n%x\n%x", got, all)
	}
}
