package aggregator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// collector is an upstream that records what arrives.
type collector struct {
	wire.NopHandler
	mu     sync.Mutex
	ticks  map[string][]time.Time
	values map[string]float64
	states []string
}

func (c *collector) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ticks[node] = append(c.ticks[node], t)
	for i, d := range descs {
		c.values[node+"/"+d.Name] = values[i]
	}
}

func (c *collector) NodeState(node string, up bool, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := "down"
	if up {
		s = "up"
	}
	c.states = append(c.states, node+" "+s)
}

func (c *collector) snapshot() (map[string]int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string]int{}
	for k, v := range c.ticks {
		n[k] = len(v)
	}
	return n, append([]string(nil), c.states...)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A child's ticks reach the upstream through the aggregator; when the
// child stops it is reported down within 3 intervals, and the aggregator
// sends its own health as a stream.
func TestForwardAndDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := &collector{ticks: map[string][]time.Time{}, values: map[string]float64{}}
	uln := listen(t)
	go wire.Serve(ctx, uln, wire.ServerOptions{Log: quiet()}, up)

	const iv = 100 * time.Millisecond
	agg, err := New(Config{Name: "agg-test", Listen: "127.0.0.1:0", Upstream: []string{uln.Addr().String()}, Interval: iv, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go agg.Run(ctx)
	waitFor(t, "aggregator listening", 5*time.Second, func() bool { return agg.Addr() != "" })

	cctx, ccancel := context.WithCancel(ctx)
	client, err := wire.NewClient(wire.ClientOptions{Addrs: []string{agg.Addr()}, Name: "cn1", Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { client.Run(cctx); close(done) }()
	cs := client.NewStream("cn1")
	d := metric.NewDesc("node_load1", "load", metric.Gauge)
	var b metric.Batch
	base := time.Now().Truncate(iv)
	for i := 0; i < 10; i++ {
		b.Reset(base.Add(time.Duration(i) * iv))
		b.Add(d, float64(i))
		client.Tick(cs, b.Time, b.Descs, b.Values)
	}
	waitFor(t, "10 ticks upstream", 5*time.Second, func() bool { n, _ := up.snapshot(); return n["cn1"] == 10 })
	up.mu.Lock()
	if v := up.values["cn1/node_load1"]; v != 9 {
		t.Errorf("last value %v, want 9", v)
	}
	for i, ts := range up.ticks["cn1"] {
		if !ts.Equal(base.Add(time.Duration(i) * iv)) {
			t.Errorf("tick %d at %v, out of order or altered", i, ts)
		}
	}
	up.mu.Unlock()
	ccancel()
	<-done
	stopped := time.Now()
	waitFor(t, "cn1 down", 5*time.Second, func() bool {
		_, st := up.snapshot()
		return len(st) >= 2 && st[len(st)-1] == "cn1 down"
	})
	if took := time.Since(stopped); took > 3*iv+500*time.Millisecond {
		t.Errorf("down detected after %v, want about 3 intervals (%v)", took, 3*iv)
	}
	waitFor(t, "aggregator health upstream", 5*time.Second, func() bool {
		up.mu.Lock()
		defer up.mu.Unlock()
		return up.values["agg-test/vigil_aggregator_values_received_total"] == 10
	})
}

// While the upstream is away, ticks are buffered and replayed in order.
func TestBufferAndReplay(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	uln := listen(t)
	uaddr := uln.Addr().String()
	uln.Close() // upstream not there yet

	agg, err := New(Config{Name: "agg-buf", Listen: "127.0.0.1:0", Upstream: []string{uaddr}, Interval: time.Second, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go agg.Run(ctx)
	waitFor(t, "aggregator listening", 5*time.Second, func() bool { return agg.Addr() != "" })
	client, _ := wire.NewClient(wire.ClientOptions{Addrs: []string{agg.Addr()}, Name: "cn2", Log: quiet()})
	go client.Run(ctx)
	cs := client.NewStream("cn2")
	d := metric.NewDesc("x", "x", metric.Counter)
	var b metric.Batch
	base := time.Unix(1_700_000_000, 0)
	for i := 0; i < 50; i++ {
		b.Reset(base.Add(time.Duration(i) * time.Second))
		b.Add(d, float64(i*10))
		client.Tick(cs, b.Time, b.Descs, b.Values)
	}
	waitFor(t, "aggregator received 50 values", 5*time.Second, func() bool { return agg.received.Load() == 50 })

	up := &collector{ticks: map[string][]time.Time{}, values: map[string]float64{}}
	uln2, err := net.Listen("tcp", uaddr)
	if err != nil {
		t.Skipf("upstream port taken meanwhile: %v", err)
	}
	go wire.Serve(ctx, uln2, wire.ServerOptions{Log: quiet()}, up)
	waitFor(t, "replay of 50 ticks", 10*time.Second, func() bool { n, _ := up.snapshot(); return n["cn2"] == 50 })
	up.mu.Lock()
	defer up.mu.Unlock()
	for i, ts := range up.ticks["cn2"] {
		if !ts.Equal(base.Add(time.Duration(i) * time.Second)) {
			t.Fatalf("replayed tick %d at %v: out of order", i, ts)
		}
	}
}

// Expected children come from a host-list file that is re-read when it
// changes (and on Reload, as SIGHUP does), without a restart.
func TestChildrenFileReload(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	hosts := dir + "/children"
	if err := os.WriteFile(hosts, []byte("# rack 1\ncn[001-004]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	uln := listen(t)
	defer uln.Close()
	agg, err := New(Config{Name: "agg-file", Listen: "127.0.0.1:0", Upstream: []string{uln.Addr().String()},
		Interval: 50 * time.Millisecond, ChildrenFile: hosts, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, down := agg.Liveness().Counts(); down != 4 {
		t.Fatalf("expected children down = %d, want 4 (listed, never seen)", down)
	}
	go agg.Run(ctx)
	// A later mtime even on file systems with coarse timestamps.
	later := time.Now().Add(2 * time.Second)
	if err := os.WriteFile(hosts, []byte("cn[001-006]\nlogin1:9101\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(hosts, later, later)
	waitFor(t, "children file re-read", 5*time.Second, func() bool { _, d := agg.Liveness().Counts(); return d == 7 })
	os.WriteFile(hosts, []byte("cn001\n"), 0o644)
	agg.Reload()
	waitFor(t, "reload", 5*time.Second, func() bool { _, d := agg.Liveness().Counts(); return d == 1 })
	// A broken file keeps the previous list.
	os.WriteFile(hosts, []byte("cn[9-1]\n"), 0o644)
	agg.Reload()
	time.Sleep(200 * time.Millisecond)
	if _, d := agg.Liveness().Counts(); d != 1 {
		t.Errorf("after a bad file, down = %d, want the previous 1", d)
	}
}

// While a child whose clock is an hour slow streams its "late" ticks, 50
// children that stopped are still reported down within about 3 intervals.
func TestLaggingChildDoesNotStopDownDetection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := &collector{ticks: map[string][]time.Time{}, values: map[string]float64{}}
	uln := listen(t)
	go wire.Serve(ctx, uln, wire.ServerOptions{Log: quiet()}, up)
	const iv = 100 * time.Millisecond
	agg, err := New(Config{Name: "agg-lag", Listen: "127.0.0.1:0", Upstream: []string{uln.Addr().String()}, Interval: iv, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go agg.Run(ctx)
	waitFor(t, "aggregator listening", 5*time.Second, func() bool { return agg.Addr() != "" })
	d := metric.NewDesc("node_load1", "load", metric.Gauge)
	for i := range 50 {
		agg.Tick(fmt.Sprintf("cn%02d", i), time.Now(), []*metric.Desc{d}, []float64{1})
	}
	stopped := time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(iv / 4)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				agg.Tick("slow", now.Add(-time.Hour), []*metric.Desc{d}, []float64{1})
			}
		}
	}()
	waitFor(t, "50 stopped children reported down", 3*iv+3*time.Second, func() bool {
		_, st := up.snapshot()
		down := 0
		for _, s := range st {
			if strings.HasSuffix(s, " down") {
				down++
			}
		}
		return down == 50
	})
	if took := time.Since(stopped); took > 3*iv+time.Second {
		t.Errorf("down reported after %v, want about 3 intervals (%v)", took, 3*iv)
	}
}
