package aggregator

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// A keyed tree, child → aggregator → upstream, every link with tagged
// frames: ticks arrive in order, acknowledgements come back end to end,
// and the child's down state reaches the top.
func TestKeyedTree(t *testing.T) {
	key := []byte("0123456789abcdef-tree-key")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := &collector{ticks: map[string][]time.Time{}, values: map[string]float64{}}
	var ust wire.ServerStats
	uln := listen(t)
	go wire.Serve(ctx, uln, wire.ServerOptions{Key: key, Log: quiet(), Stats: &ust}, up)

	const iv = 100 * time.Millisecond
	agg, err := New(Config{Name: "agg-keyed", Listen: "127.0.0.1:0", Upstream: []string{uln.Addr().String()},
		Interval: iv, Key: key, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go agg.Run(ctx)
	waitFor(t, "aggregator listening", 5*time.Second, func() bool { return agg.Addr() != "" })

	cctx, ccancel := context.WithCancel(ctx)
	client, err := wire.NewClient(wire.ClientOptions{Addrs: []string{agg.Addr()}, Key: key, Name: "cn1", Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { client.Run(cctx); close(done) }()
	cs := client.NewStream("cn1")
	d := metric.NewDesc("node_load1", "load", metric.Gauge)
	var b metric.Batch
	base := time.Now().Truncate(iv)
	tick := func(i int) {
		b.Reset(base.Add(time.Duration(i) * iv))
		b.Add(d, float64(i))
		client.Tick(cs, b.Time, b.Descs, b.Values)
	}
	for i := range 10 {
		tick(i)
	}
	sent := time.Now()
	waitFor(t, "10 ticks upstream", 5*time.Second, func() bool { n, _ := up.snapshot(); return n["cn1"] >= 10 })
	// A receiver acknowledges as frames come in, so keep ticking.
	for i := 10; !client.DeliveredBefore().After(sent); i++ {
		if i == 300 {
			t.Fatal("the first 10 ticks were never acknowledged through the tree")
		}
		tick(i)
		time.Sleep(10 * time.Millisecond)
	}
	up.mu.Lock()
	for i, ts := range up.ticks["cn1"][:10] {
		if !ts.Equal(base.Add(time.Duration(i) * iv)) {
			t.Errorf("tick %d at %v, out of order or altered", i, ts)
		}
	}
	up.mu.Unlock()
	ccancel()
	<-done
	waitFor(t, "cn1 down", 5*time.Second, func() bool {
		_, st := up.snapshot()
		return len(st) >= 2 && st[len(st)-1] == "cn1 down"
	})
	if ust.ProtocolErrors.Load() != 0 || ust.AuthFailures.Load() != 0 || agg.wstats.ProtocolErrors.Load() != 0 {
		t.Errorf("protocol errors %d/%d, auth failures %d", ust.ProtocolErrors.Load(), agg.wstats.ProtocolErrors.Load(), ust.AuthFailures.Load())
	}
}
