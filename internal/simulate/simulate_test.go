package simulate

import (
	"context"
	"log/slog"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func sampleTicks(n *Node, ticks int, dt time.Duration) []metric.Batch {
	out := make([]metric.Batch, ticks)
	t0 := time.Unix(1_763_800_000, 0)
	for i := range out {
		out[i].Reset(t0.Add(time.Duration(i) * dt))
		n.Sample(out[i].Time, dt, &out[i])
	}
	return out
}

func TestNodeData(t *testing.T) {
	sch := NewSchema(16)
	ticks := sampleTicks(NewNode("cn00001", sch, 1), 200, time.Second)
	if n := ticks[0].Len(); n != sch.Len() || n < 250 || n > 400 {
		t.Fatalf("%d values per tick, schema says %d; want about 300", n, sch.Len())
	}
	names := map[string]bool{}
	for _, s := range ticks[0].Samples() {
		names[s.Desc.Name] = true
	}
	for _, want := range []string{"node_cpu_seconds_total", "node_load1", "node_memory_MemFree_bytes",
		"node_vmstat_pgfault", "node_network_receive_bytes_total", "node_disk_io_time_seconds_total",
		"node_filesystem_avail_bytes", "node_context_switches_total", "vigil_process_cpu_seconds_total"} {
		if !names[want] {
			t.Errorf("no %s series", want)
		}
	}
	unchanged, changed := 0, 0
	for i := 1; i < len(ticks); i++ {
		prev, cur := ticks[i-1].Samples(), ticks[i].Samples()
		if len(prev) != len(cur) {
			t.Fatalf("tick %d: %d values after %d", i, len(cur), len(prev))
		}
		for k := range cur {
			if cur[k].Desc != prev[k].Desc {
				continue // a top process was replaced
			}
			v, p := cur[k].Value, prev[k].Value
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("tick %d %s = %v", i, cur[k].Desc.Name, v)
			}
			if cur[k].Desc.Type == metric.Counter && v < p {
				t.Fatalf("tick %d: counter %s%v went back %v -> %v", i, cur[k].Desc.Name, cur[k].Desc.Labels, p, v)
			}
			if v == p {
				unchanged++
			} else {
				changed++
			}
		}
	}
	// Like real nodes: many values stay put, many move.
	if frac := float64(unchanged) / float64(unchanged+changed); frac < 0.2 || frac > 0.8 {
		t.Errorf("%.0f%% of values unchanged between ticks, want a realistic mix", 100*frac)
	}
	// CPU time per core adds up to the elapsed time (USER_HZ resolution).
	var sum0, sum1 float64
	for k, s := range ticks[0].Samples() {
		if s.Desc.Name == "node_cpu_seconds_total" && s.Desc.Labels[0].Value == "3" {
			sum0 += s.Value
			sum1 += ticks[100].Samples()[k].Value
		}
	}
	if d := sum1 - sum0; math.Abs(d-100) > 1 {
		t.Errorf("cpu 3 accounted %.2fs over 100s", d)
	}
}

func TestNodesDiffer(t *testing.T) {
	sch := NewSchema(4)
	a := sampleTicks(NewNode("cn00001", sch, 1), 2, time.Second)
	b := sampleTicks(NewNode("cn00002", sch, 2), 2, time.Second)
	same := 0
	for k := range a[1].Samples() {
		if a[1].Samples()[k].Value == b[1].Samples()[k].Value {
			same++
		}
	}
	if same > len(a[1].Samples())/2 {
		t.Errorf("%d of %d values equal on two nodes", same, len(a[1].Samples()))
	}
	if a[0].Samples()[0].Desc != b[0].Samples()[0].Desc {
		t.Error("nodes of one schema do not share descriptors")
	}
}

type countHandler struct {
	wire.NopHandler
	mu     sync.Mutex
	ticks  map[string]int
	values int
}

func (h *countHandler) Tick(node string, _ time.Time, _ []*metric.Desc, v []float64) {
	h.mu.Lock()
	h.ticks[node]++
	h.values += len(v)
	h.mu.Unlock()
}

func TestRunStreams(t *testing.T) {
	rec, err := ReadRecording(strings.NewReader(recording(5)))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("model", func(t *testing.T) { runStreams(t, Options{CPUs: 2}) })
	t.Run("jobs", func(t *testing.T) { runStreams(t, Options{CPUs: 2, Jobs: true}) })
	t.Run("replay", func(t *testing.T) { runStreams(t, Options{Replay: rec}) })
}

func runStreams(t *testing.T, o Options) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &countHandler{ticks: map[string]int{}}
	stats := &wire.ServerStats{}
	quiet := slog.New(slog.DiscardHandler)
	go func() { _ = wire.Serve(ctx, ln, wire.ServerOptions{Stats: stats, Log: quiet}, h) }()
	const nodes = 25
	done := make(chan error, 1)
	go func() {
		o.Nodes, o.Interval, o.Upstream, o.GroupSize, o.Log = nodes, 20*time.Millisecond, []string{ln.Addr().String()}, 10, quiet
		done <- Run(ctx, o)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		ok := len(h.ticks) == nodes
		for _, n := range h.ticks {
			ok = ok && n >= 3
		}
		h.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d nodes ticked: %v", len(h.ticks), h.ticks)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for node := range h.ticks {
		if !strings.HasPrefix(node, "cn000") || len(node) != 7 {
			t.Errorf("node name %q", node)
		}
	}
	if stats.ProtocolErrors.Load() != 0 || stats.Accepted.Load() != 3 {
		t.Errorf("protocol errors %d, connections %d (want 3 groups)", stats.ProtocolErrors.Load(), stats.Accepted.Load())
	}
}

func TestRunOptions(t *testing.T) {
	for _, o := range []Options{
		{Nodes: 0, Interval: time.Second, Upstream: []string{"127.0.0.1:1"}, CPUs: 1},
		{Nodes: 1, Interval: 0, Upstream: []string{"127.0.0.1:1"}, CPUs: 1},
		{Nodes: 1, Interval: time.Second, CPUs: 1},
		{Nodes: 1, Interval: time.Second, Upstream: []string{"127.0.0.1:1"}, CPUs: 0},
		{Nodes: 1, Interval: time.Second, Upstream: []string{"nohostport"}, CPUs: 1},
	} {
		if err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) accepted", o)
		}
	}
}

func TestNodeName(t *testing.T) {
	if got := NodeName(1); got != "cn00001" {
		t.Errorf("NodeName(1) = %q", got)
	}
	if got := NodeName(20000); got != "cn20000" {
		t.Errorf("NodeName(20000) = %q", got)
	}
}
