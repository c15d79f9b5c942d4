package server

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/treestatus"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// One remote-write sample a day ahead used to move the head a day forward,
// after which every node's samples were refused as out of bounds.
func TestRemoteWriteFutureSampleRefused(t *testing.T) {
	s, srv, _ := startServerStream(t, false, receiverOn)
	now := time.Now()
	ms := func(t time.Time) float64 { return float64(t.UnixMilli()) }
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("up", []string{"node", "cn01"}, [2]float64{ms(now), 1}),
		series("up", []string{"node", "fast"}, [2]float64{ms(now.Add(24 * time.Hour)), 1}),
	}}
	code, body := postWrite(t, srv, encodeWrite(t, req), "application/x-protobuf")
	if code != http.StatusBadRequest || !strings.Contains(body, "ahead of the server's clock") {
		t.Fatalf("sample a day ahead: %d %q, want 400 naming the clock", code, body)
	}
	if h := s.store.Stats().HeadMaxTime; h > now.Add(time.Minute).UnixMilli() {
		t.Fatalf("head max time moved to %s", time.UnixMilli(h))
	}
	// Every node's next samples are still stored and up is fresh.
	next := now.Add(time.Second)
	req = &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("up", []string{"node", "cn01"}, [2]float64{ms(next), 1}),
		series("up", []string{"node", "cn02"}, [2]float64{ms(next), 1}),
	}}
	if code, body := postWrite(t, srv, encodeWrite(t, req), "application/x-protobuf"); code != http.StatusNoContent {
		t.Fatalf("next samples: %d %q", code, body)
	}
	at := strconv.FormatFloat(float64(next.UnixMilli())/1000, 'f', 3, 64)
	got := getJSON(t, srv+"/api/v1/query?time="+at+"&query="+url.QueryEscape(`count(time() - timestamp(up) < 1)`))
	if !strings.Contains(got, `"2"]`) {
		t.Errorf("fresh up series at %s: %s, want 2", at, got)
	}
	got = getJSON(t, srv+"/api/v1/query?time="+at+"&query="+url.QueryEscape(`up{node="fast"}`))
	if !strings.Contains(got, `"result":[]`) {
		t.Errorf("the future sample was stored: %s", got)
	}
}

// Over the wire, a node two hours fast is refused and flagged clock skew
// (queryable), while the other node is stored.
func TestStreamClockSkewFlagged(t *testing.T) {
	s, srv, addr := startServerStream(t, true, func(c *Config) { c.Interval = Duration(100 * time.Millisecond) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "agg1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(ctx) }()
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	streams := map[string]*wire.ClientStream{"cn01": c.NewStream("cn01"), "fast": c.NewStream("fast")}
	q := url.QueryEscape(`vigil_node_clock_skew == 1 or on(node) node_load1`)
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		now := time.Now()
		for node, cs := range streams {
			var b metric.Batch
			if node == "fast" {
				b.Reset(now.Add(2 * time.Hour))
			} else {
				b.Reset(now)
			}
			b.Add(load, 1)
			c.Tick(cs, b.Time, b.Descs, b.Values)
		}
		got = getJSON(t, srv+"/api/v1/query?query="+q)
		if strings.Contains(got, `"vigil_node_clock_skew","instance":"fast","job":"node","node":"fast"`) && strings.Contains(got, `"node_load1","instance":"cn01","job":"node","node":"cn01"`) {
			break
		}
	}
	if !strings.Contains(got, `"vigil_node_clock_skew","instance":"fast","job":"node","node":"fast"`) || !strings.Contains(got, `"node_load1","instance":"cn01","job":"node","node":"cn01"`) {
		t.Fatalf("want fast flagged and cn01 stored: %s", got)
	}
	if strings.Contains(got, `"node_load1","instance":"fast"`) {
		t.Errorf("samples of the fast node stored: %s", got)
	}
	// What `vigil tree status` and the dashboard's tree view show.
	v, err := webSource{api: s.api}.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tree, ok := v.(*treestatus.Tree)
	if !ok || tree.NodesClockSkew != 1 || tree.ClockSkew[0].Node != "fast" || math.Abs(tree.ClockSkew[0].OffsetSeconds-7200) > 1 {
		t.Fatalf("tree: %#v, want fast listed about 7200 s ahead", v)
	}
}

func TestMaxFutureFlag(t *testing.T) {
	cfg, err := parseFlags([]string{"--max-future", "5m"})
	if err != nil || cfg.MaxFuture.D() != 5*time.Minute {
		t.Fatalf("--max-future 5m: %v, %v", cfg.MaxFuture, err)
	}
}
