package server

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// TestStreamTargetLabels streams a node's tick over the wire, with a
// NUMA series carrying node_exporter's own node label, and reads it back
// as node_exporter dashboards select it: by job and instance.
func TestStreamTargetLabels(t *testing.T) {
	for _, job := range []string{"", "hpc"} {
		t.Run("job="+job, func(t *testing.T) { testStreamTargetLabels(t, job) })
	}
}

func testStreamTargetLabels(t *testing.T, job string) {
	_, srv, addr := startServerStream(t, true, func(c *Config) {
		if job != "" {
			c.Job = job
		}
	})
	if job == "" {
		job = DefaultJob
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "agg1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(ctx) }()
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	numa := metric.NewDesc("node_memory_numa_MemFree", "Memory information field MemFree_bytes.", metric.Gauge, "node", "1")
	now := time.Now().Truncate(time.Second)
	var b metric.Batch
	b.Reset(now)
	b.Add(load, 0.5)
	b.Add(numa, 4096)
	c.Tick(c.NewStream("cn01"), b.Time, b.Descs, b.Values)
	at := strconv.FormatInt(now.Unix(), 10)
	q := url.QueryEscape(`{instance="cn01",job="` + job + `"}`)
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = getJSON(t, srv+"/api/v1/query?time="+at+"&query="+q); strings.Count(got, `"metric"`) == 3 {
			break
		}
	}
	for _, want := range []string{
		`{"metric":{"__name__":"node_load1","instance":"cn01","job":"` + job + `","node":"cn01"},"value":[` + at + `,"0.5"]}`,
		`{"metric":{"__name__":"node_memory_numa_MemFree","instance":"cn01","job":"` + job + `","node":"1"},"value":[` + at + `,"4096"]}`,
		`{"metric":{"__name__":"up","instance":"cn01","job":"` + job + `","node":"cn01"},"value":[` + at + `,"1"]}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("got %s\nwant it to contain %s", got, want)
		}
	}
}
