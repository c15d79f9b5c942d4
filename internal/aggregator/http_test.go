package aggregator

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestMetricsRegistry: /metrics comes from a client_golang registry with
// the names and labels the health stream uses, plus Go and process metrics.
func TestMetricsRegistry(t *testing.T) {
	uln := listen(t)
	defer uln.Close()
	agg, err := New(Config{Name: "agg-m", Listen: "127.0.0.1:0", Upstream: []string{uln.Addr().String()}, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(agg.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	for name, typ := range map[string]string{
		"vigil_aggregator_children_up": "GAUGE", "vigil_aggregator_values_received_total": "COUNTER",
		"vigil_aggregator_connections": "GAUGE", "vigil_aggregator_auth_failures_total": "COUNTER",
		"vigil_aggregator_refused_total": "COUNTER", "vigil_aggregator_info": "GAUGE",
		"go_goroutines": "GAUGE", "process_open_fds": "GAUGE",
	} {
		f := fams[name]
		if f == nil {
			t.Errorf("/metrics lacks %s", name)
			continue
		}
		if got := f.GetType().String(); got != typ {
			t.Errorf("%s type %s, want %s", name, got, typ)
		}
		if !strings.HasPrefix(name, "vigil_aggregator_") {
			continue
		}
		lbl := map[string]string{}
		for _, l := range f.GetMetric()[0].GetLabel() {
			lbl[l.GetName()] = l.GetValue()
		}
		if lbl["node"] != "agg-m" || lbl["aggregator"] != "agg-m" {
			t.Errorf("%s labels %v, want node and aggregator agg-m", name, lbl)
		}
	}
}

// TestWebConfigAuth: with a web config the aggregator's HTTP listener
// answers 401 without credentials and serves over TLS with them.
func TestWebConfigAuth(t *testing.T) {
	// An upstream that refuses connections: one that accepts and never
	// answers holds the client's handshake, and so shutdown, for 10s.
	uln := listen(t)
	uln.Close()
	hln := listen(t)
	httpAddr := hln.Addr().String()
	hln.Close()
	file, client := testutil.WebConfig(t, "ops", "pw", true)
	agg, err := New(Config{Name: "agg-auth", Listen: "127.0.0.1:0", Upstream: []string{uln.Addr().String()},
		HTTP: httpAddr, WebConfig: file, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agg.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	get := func(path string, auth bool) (int, error) {
		req, _ := http.NewRequest("GET", "https://"+httpAddr+path, nil)
		if auth {
			req.SetBasicAuth("ops", "pw")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	waitFor(t, "aggregator HTTP", 10*time.Second, func() bool { _, err := get("/metrics", false); return err == nil })
	for _, path := range []string{"/metrics", "/api/tree"} {
		if code, err := get(path, false); err != nil || code != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials = %d %v, want 401", path, code, err)
		}
		if code, err := get(path, true); err != nil || code != http.StatusOK {
			t.Errorf("GET %s with credentials = %d %v, want 200", path, code, err)
		}
	}
}

// TestWireMetricsServed: the children's listener's counters are on the
// aggregator's /metrics while it runs; a garbage connection is counted.
func TestWireMetricsServed(t *testing.T) {
	uln := listen(t)
	uln.Close()
	cln := listen(t)
	childAddr := cln.Addr().String()
	cln.Close()
	agg, err := New(Config{Name: "agg-w", Listen: childAddr, Upstream: []string{uln.Addr().String()}, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agg.Run(ctx) }()
	defer func() { cancel(); <-done }()
	srv := httptest.NewServer(agg.Handler())
	defer srv.Close()
	counted := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !counted; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", childAddr); err == nil {
			c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			c.Close()
		}
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		counted = regexp.MustCompile(`(?m)^vigil_wire_protocol_errors_total [1-9]`).Match(body) &&
			strings.Contains(string(body), "vigil_wire_connections ")
	}
	if !counted {
		t.Fatal("garbage connections not counted in vigil_wire_protocol_errors_total on /metrics")
	}
}

// TestDebugPprof: profiles only with DebugPprof (--debug-pprof sets it).
func TestDebugPprof(t *testing.T) {
	uln := listen(t)
	defer uln.Close()
	heap := func(pprof bool) (int, []byte) {
		t.Helper()
		agg, err := New(Config{Name: "agg-p", Listen: "127.0.0.1:0", Upstream: []string{uln.Addr().String()}, Log: quiet(), DebugPprof: pprof})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(agg.Handler())
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/debug/pprof/heap")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, b
	}
	if code, _ := heap(false); code != http.StatusNotFound {
		t.Errorf("heap profile without --debug-pprof: %d, want 404", code)
	}
	if code, b := heap(true); code != http.StatusOK || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("heap profile with --debug-pprof: %d, %d bytes, want 200 and a gzipped profile", code, len(b))
	}
	s := &Settings{}
	fs := flag.NewFlagSet("aggregator", flag.ContinueOnError)
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--debug-pprof"}); err != nil || !s.DebugPprof {
		t.Fatalf("--debug-pprof did not set DebugPprof: %v", err)
	}
	if cfg, err := s.Config(quiet()); err != nil || !cfg.DebugPprof {
		t.Fatalf("Config dropped DebugPprof: %v", err)
	}
}
