package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// reportJSON is a report answer shaped as the contract says, written by
// hand so the test does not depend on the server's encoder.
const reportJSON = `{"status":"success","data":{
 "job":{"id":"1234_7","user":"alice","account":"phys","partition":"cpu","nodes":["cn1","cn2","cn3"],
  "cpus":48,"mem_bytes":68719476736,"time_limit":7200,"start":"2026-11-20T08:00:00Z","end":"2026-11-20T09:00:00Z","state":"completed"},
 "summary":{"cpu_efficiency":0.61,"mem_used_peak_bytes":3221225472,"mem_efficiency":0.046875,"read_bytes":1073741824,"write_bytes":0,
  "nodes":[{"node":"cn1","cpu_efficiency":0.75,"mem_used_peak_bytes":1073741824,"read_bytes":357913941,"write_bytes":0},
           {"node":"cn2","cpu_efficiency":0.74,"mem_used_peak_bytes":1073741824,"read_bytes":357913941,"write_bytes":0},
           {"node":"cn3","cpu_efficiency":0.34,"mem_used_peak_bytes":1073741824,"read_bytes":357913942,"write_bytes":0}],
  "stragglers":["cn3"],
  "notes":["used 5 % of the 64 GiB of memory asked: ask for 4 GiB next time","cn3 ran 54 % below its job peers' median CPU for 80 % of the run: a straggler"]},
 "series":{"cpu":{"median":[[1795161600,12]],"p10":[[1795161600,6]],"p90":[[1795161600,12]],"nodes":{"cn1":[[1795161600,12]]}}},
 "source":"store","elapsed":3600}}`

func reportServer(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs/{id}/report", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.PathValue("id") != "1234_7" {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"status":"error","errorType":"not_found","error":"no such job"}`))
			return
		}
		w.Write([]byte(reportJSON))
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs.URL
}

func TestJobReportCommand(t *testing.T) {
	srv := reportServer(t)
	run := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := runJobReport(context.Background(), args, &out, &errb)
		return out.String(), err
	}
	out, err := run("1234_7", "--server", srv)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Job: 1234_7", "User: alice", "Nodes: 3 (cn1, cn2, cn3)", "Cores: 48",
		"Memory asked: 64 GiB (21.3 GiB per node)", "Run time: 01:00:00 of 02:00:00 limit (50 %)",
		"] 61 %", "3 GiB peak", "cn3                 34 %", "straggler",
		"* used 5 % of the 64 GiB of memory asked: ask for 4 GiB next time",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}

	out, err = run("--json", "--server", srv, "1234_7")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if got["job"].(map[string]any)["id"] != "1234_7" || got["summary"].(map[string]any)["cpu_efficiency"] != 0.61 {
		t.Errorf("--json printed %s", out)
	}

	_, err = run("999", "--server", srv)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(err.Error(), `no such job "999"`) {
		t.Errorf("unknown job: %v, want exit 1 no such job", err)
	}
	if _, err = run("--server", srv); !errors.As(err, &ee) || ee.Code != 2 {
		t.Errorf("no id: %v, want exit 2", err)
	}
	if _, err = run("1", "2"); !errors.As(err, &ee) || ee.Code != 2 {
		t.Errorf("two ids: %v, want exit 2", err)
	}
}
