package server

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/aggregator"
	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/treestatus"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Machines that are expected but never connect must be down everywhere a
// user looks: `up` in the API (and so alert rules), the dashboard's node
// list and `vigil tree status`, which names them. Five are expected, three
// connect; the expectation comes from an aggregator's children list or
// from the server's topology.
func TestExpectedNeverConnectedAreDown(t *testing.T) {
	const interval = 100 * time.Millisecond
	expected := []string{"cn1", "cn2", "cn3", "cn4", "cn5"}
	for _, via := range []string{"aggregator", "topology"} {
		t.Run(via, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, _, streamAddr := startServerStream(t, true, func(c *Config) {
				c.Interval = Duration(interval)
				if via == "topology" {
					path := filepath.Join(t.TempDir(), "topology")
					if err := os.WriteFile(path, []byte("rack1: cn[1-5]\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					c.Topology = path
				}
			})
			sendTo := streamAddr
			if via == "aggregator" {
				a, err := aggregator.New(aggregator.Config{Name: "agg1", Listen: "127.0.0.1:0", Upstream: []string{streamAddr},
					Interval: interval, Children: expected, Log: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- a.Run(ctx) }()
				t.Cleanup(func() { cancel(); <-done })
				for deadline := time.Now().Add(5 * time.Second); a.Addr() == "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				}
				if sendTo = a.Addr(); sendTo == "" {
					t.Fatal("aggregator did not bind")
				}
			}
			sendTicks(ctx, t, sendTo, expected[:3], interval)

			// Poll until the two never connected are down and the three up.
			var down, up []string
			var tree *treestatus.Tree
			deadline := time.Now().Add(3 * time.Second)
			for ; time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				down, up = upByValue(t, s)
				var err error
				tree, err = treestatus.Build(ctx, func(ctx context.Context, expr string) ([]treestatus.Sample, error) {
					return webSource{api: s.api}.instant(ctx, expr, time.Now())
				})
				if err != nil {
					t.Fatal(err)
				}
				if slices.Equal(down, []string{"cn4", "cn5"}) && slices.Equal(up, expected[:3]) && slices.Equal(tree.Down, []string{"cn4", "cn5"}) {
					break
				}
			}
			if !slices.Equal(down, []string{"cn4", "cn5"}) || !slices.Equal(up, expected[:3]) {
				t.Fatalf("up == 0 for %v, up == 1 for %v; want cn4 cn5 down, cn1-3 up", down, up)
			}
			if !slices.Equal(tree.Down, []string{"cn4", "cn5"}) || !slices.Equal(tree.DownRanges, []string{"cn[4-5]"}) || tree.NodesDown != 2 || tree.NodesUp != 3 {
				t.Fatalf("tree status: %d up, %d down %v %v; want 3 up, cn4 cn5 down", tree.NodesUp, tree.NodesDown, tree.Down, tree.DownRanges)
			}
			// The dashboard's tree view gets the same, also without aggregators.
			if wt, err := (webSource{api: s.api}).Tree(ctx); err != nil || wt == nil || !slices.Equal(wt.(*treestatus.Tree).Down, []string{"cn4", "cn5"}) {
				t.Fatalf("dashboard tree %+v, %v; want cn4 cn5 down", wt, err)
			}
			nodes, err := webSource{api: s.api}.Nodes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var webDown []string
			for _, n := range nodes {
				if !n.Up {
					webDown = append(webDown, n.Name)
				}
			}
			sort.Strings(webDown)
			if len(nodes) != 5 || !slices.Equal(webDown, []string{"cn4", "cn5"}) {
				t.Fatalf("dashboard nodes %+v, want 5 with cn4 cn5 down", nodes)
			}
			// Each never-connected node is one node_down event.
			var evDown []string
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				evDown = evDown[:0]
				evs, _, err := s.Events().Query(events.Filter{Kinds: []string{events.KindNodeDown}, Limit: 100})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range evs {
					evDown = append(evDown, e.Node)
				}
				sort.Strings(evDown)
				if slices.Equal(evDown, []string{"cn4", "cn5"}) || time.Now().After(deadline) {
					break
				}
			}
			if !slices.Equal(evDown, []string{"cn4", "cn5"}) {
				t.Fatalf("node_down events for %v, want cn4 cn5 once each", evDown)
			}
		})
	}
}

// sendTicks streams a tick of each node every interval until ctx ends.
func sendTicks(ctx context.Context, t *testing.T, addr string, nodes []string, interval time.Duration) {
	t.Helper()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "nodes", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(ctx) }()
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	streams := make([]*wire.ClientStream, len(nodes))
	for i, n := range nodes {
		streams[i] = c.NewStream(n)
	}
	go func() {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		var b metric.Batch
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				for _, st := range streams {
					b.Reset(now)
					b.Add(load, 1)
					c.Tick(st, b.Time, b.Descs, b.Values)
				}
			}
		}
	}()
}

// upByValue lists the nodes (aggregators excluded) with up == 0 and up == 1.
func upByValue(t *testing.T, s *Server) (down, up []string) {
	t.Helper()
	res, err := s.api.InstantSamples(context.Background(), `up unless on(node) label_replace(vigil_aggregator_info, "node", "$1", "aggregator", "(.*)")`, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Value == 0 {
			down = append(down, r.Labels["node"])
		} else {
			up = append(up, r.Labels["node"])
		}
	}
	sort.Strings(down)
	sort.Strings(up)
	return down, up
}
