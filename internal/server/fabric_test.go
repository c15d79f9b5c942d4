package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
)

// TestFabricAPI: the server serves the fabric API over its own store and
// job index: a simulated fabric's sweep stored as ingest stores it, a
// running job on the first leaf's nodes under that leaf's up-links, and
// the fabric metrics on /metrics.
func TestFabricAPI(t *testing.T) {
	srv, base := startServer(t)
	f, err := simulate.NewFabric(simulate.FabricOptions{Nodes: 36, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	var b metric.Batch
	for i := range 36 {
		sw := f.Sweeper(i)
		if sw == nil {
			continue
		}
		for ts := now.Add(-80 * time.Second); !ts.After(now); ts = ts.Add(time.Second) {
			b.Reset(ts)
			sw.Sample(ts, time.Second, &b)
			if err := srv.Store().AppendTick(simulate.NodeName(1+i), ts, b.Descs, b.Values, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := srv.Jobs().Index().Upsert(&jobs.Job{ID: "5", User: "ann", Nodes: []string{"cn00003"}, State: jobs.StateRunning, Start: now}); err != nil {
		t.Fatal(err)
	}
	var fab struct {
		Data struct {
			Switches []struct{ Name, Level string }
			Links    []struct{ Name string }
		}
	}
	fabricGet(t, base+"/api/v1/fabric", &fab)
	// 2 leaves of 18 nodes, 2 spines: 36 node ports and 4 cables from both ends.
	if len(fab.Data.Switches) != 4 || len(fab.Data.Links) != 44 {
		t.Fatalf("fabric: %d switches, %d links; want 4 and 44", len(fab.Data.Switches), len(fab.Data.Links))
	}
	var top struct {
		Data struct {
			Links []struct {
				Name string
				Jobs []struct{ ID string }
			}
			Total int
		}
	}
	fabricGet(t, base+"/api/v1/fabric/top?job=5&by=bytes&limit=100", &top)
	// Its node port, leaf01's 2 up-links, the spines' 2 down-links to it.
	if top.Data.Total != 5 {
		t.Fatalf("job 5's links: %d, want 5: %+v", top.Data.Total, top.Data.Links)
	}
	for _, l := range top.Data.Links {
		if len(l.Jobs) != 1 || l.Jobs[0].ID != "5" {
			t.Fatalf("%s: jobs %+v, want job 5", l.Name, l.Jobs)
		}
	}
	if page := getJSON(t, base+"/metrics"); !strings.Contains(page, "vigil_fabric_requests_failed_total 0") || !strings.Contains(page, "vigil_fabric_cache_hits_total") {
		t.Fatal("/metrics has no fabric metrics")
	}
}

func fabricGet(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}
