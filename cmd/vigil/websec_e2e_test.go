package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestE2EWebConfig is the acceptance check of issue 11 item 2: with
// --web-config, every HTTP listener of a tree (server, aggregator, sampler)
// answers 401 to a request without credentials and 200 with them, over TLS.
func TestE2EWebConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	file, client := testutil.WebConfig(t, "ops", "s3cret", true)
	srvHTTP, srvWire, aggHTTP, aggWire, smpHTTP := freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)
	start(t, "server", "server", "--http", srvHTTP, "--listen", srvWire, "--data", t.TempDir(), "--web-config", file, "--interval", "200ms")
	start(t, "aggregator", "aggregator", "--name", "agg", "--listen", aggWire, "--upstream", srvWire, "--http", aggHTTP,
		"--web-config", file, "--interval", "200ms")
	start(t, "sampler", "sampler", "--root", "testdata/node1", "--node", "n1", "--plugins", "load", "--interval", "200ms",
		"--listen", smpHTTP, "--upstream", aggWire, "--web-config", file, "--gomaxprocs", "0")
	get := func(url string, auth bool) int {
		req, _ := http.NewRequest("GET", url, nil)
		if auth {
			req.SetBasicAuth("ops", "s3cret")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, u := range []string{
		"https://" + srvHTTP + "/api/v1/query?query=up", "https://" + srvHTTP + "/metrics",
		"https://" + aggHTTP + "/metrics", "https://" + smpHTTP + "/metrics",
	} {
		waitUntil(t, u, 15*time.Second, func() bool { return get(u, true) == http.StatusOK })
		if code := get(u, false); code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials = %d, want 401", u, code)
		}
	}
	// The refusals are counted on the server's and aggregator's /metrics:
	// two requests without credentials to the server, one to the aggregator.
	for u, want := range map[string]string{srvHTTP: `vigil_http_refused_total{code="401"} 2`, aggHTTP: `vigil_http_refused_total{code="401"} 1`} {
		req, _ := http.NewRequest("GET", "https://"+u+"/metrics", nil)
		req.SetBasicAuth("ops", "s3cret")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("%s/metrics lacks %s", u, want)
		}
	}
	// The tree still works: the sampler's node reaches the server.
	waitUntil(t, "n1 stored", 15*time.Second, func() bool {
		req, _ := http.NewRequest("GET", "https://"+srvHTTP+"/api/v1/query?query=node_load1%7Bnode%3D%22n1%22%7D", nil)
		req.SetBasicAuth("ops", "s3cret")
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"node":"n1"`)
	})
}
