package server

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// A node that streams and falls silent shows as one node_down event in
// the server's event API, linked to the node.
func TestNodeDownEventThroughServer(t *testing.T) {
	s, srv, addr := startServerStream(t, true, func(c *Config) { c.Interval = duration.Duration(50 * time.Millisecond) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "agg1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(ctx) }()
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	st := c.NewStream("cn01")
	var b metric.Batch
	b.Reset(time.Now())
	b.Add(load, 1)
	c.Tick(st, b.Time, b.Descs, b.Values)
	var a struct {
		Status string
		Data   struct{ Events []events.Event }
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := json.Unmarshal([]byte(getJSON(t, srv+"/api/v1/events?kind=node_down&node=cn*")), &a); err != nil {
			t.Fatal(err)
		}
		if len(a.Data.Events) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if a.Status != "success" || len(a.Data.Events) != 1 {
		t.Fatalf("node_down events: %+v", a)
	}
	if e := a.Data.Events[0]; e.Node != "cn01" || e.Severity != events.SeverityCritical || e.Link != "#/node/cn01" {
		t.Fatalf("node_down event %+v", e)
	}
	if s.Events().Len() == 0 {
		t.Fatal("Events() holds nothing")
	}
}

func TestEventsRetentionFlag(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse([]string{"--events-retention", "30d"}); err != nil {
		t.Fatal(err)
	}
	if d := c.EventsRetention.D(); d != 30*24*time.Hour {
		t.Fatalf("--events-retention 30d = %v", d)
	}
	c.EventsRetention = -1
	if err := c.Validate(); err == nil {
		t.Fatal("negative events_retention accepted")
	}
}
