package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/prompb"
)

// A remote-write sender beyond its budget of new series gets 400 naming
// the limit; the series within the budget, old and new, are stored, and
// the refusals are counted on the server's registry.
func TestRemoteWriteSeriesLimit(t *testing.T) {
	s, srv, _ := startServerStream(t, false, receiverOn, func(c *Config) { c.MaxSeriesPerRemoteSender = 3 })
	ms := float64(base.UnixMilli())
	write := func(n int, at float64) (int, string) {
		var req prompb.WriteRequest
		for i := range n {
			req.Timeseries = append(req.Timeseries, series(fmt.Sprintf("m%d", i), []string{"job", "x"}, [2]float64{at, 1}))
		}
		return postWrite(t, srv, encodeWrite(t, &req), "application/x-protobuf")
	}
	if code, body := write(3, ms); code != 204 {
		t.Fatalf("within the limit: %d %s", code, body)
	}
	code, body := write(5, ms+1000)
	if code != 400 || !strings.Contains(body, "series limit") || !strings.Contains(body, "max_series_per_remote_write_sender") {
		t.Errorf("beyond the limit: %d %q, want 400 naming the limit", code, body)
	}
	if stored, rejected := s.rw.Stats(); stored != 6 || rejected != 2 {
		t.Errorf("stored %d rejected %d, want 6 and 2", stored, rejected)
	}
	want := `# HELP vigil_series_refused_total Samples of new series refused by the series limits, by ingest path and reason (sender or head).
# TYPE vigil_series_refused_total counter
vigil_series_refused_total{path="remote_write",reason="sender"} 2
`
	if err := testutil.GatherAndCompare(s.reg, strings.NewReader(want), "vigil_series_refused_total"); err != nil {
		t.Error(err)
	}
}

func TestLimitsConfig(t *testing.T) {
	cfg, err := LoadConfig("testdata/limits.good.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.QueryMaxConcurrent, want.QueryMaxQueued, want.QueryMaxLength, want.QueryMaxResults = 2, 8, 4096, 5000
	want.MaxSeriesPerNode, want.MaxSeriesPerRemoteSender, want.MaxHeadSeries = 10000, -1, 2_000_000
	if cfg != want {
		t.Errorf("config = %+v, want %+v", cfg, want)
	}
}
