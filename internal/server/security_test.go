package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/prompb"

	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func TestRemoteWriteReceiverOffByDefault(t *testing.T) {
	s, srv := startServer(t)
	ms := float64(time.Now().UnixMilli())
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("forged", []string{"node", "n1"}, [2]float64{ms, 1})}}
	code, body := postWrite(t, srv, encodeWrite(t, req), "application/x-protobuf")
	if code != http.StatusNotFound || !strings.Contains(body, "--enable-remote-write-receiver") {
		t.Fatalf("POST /api/v1/write with the receiver off = %d %q, want 404 naming --enable-remote-write-receiver", code, body)
	}
	if stored, _ := s.rw.Stats(); stored != 0 {
		t.Fatalf("%d samples stored with the receiver off", stored)
	}
	if got := getJSON(t, srv+"/api/v1/query?query=forged"); !strings.Contains(got, `"result":[]`) {
		t.Fatalf("forged series is queryable: %s", got)
	}
	if m := getJSON(t, srv+"/metrics"); !strings.Contains(m, "vigil_remote_write_requests_refused_total 1") {
		t.Fatalf("refusal not counted on /metrics")
	}
}

func TestWebConfigBasicAuth(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		name := "http"
		if withTLS {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			file, client := testutil.WebConfig(t, "admin", "s3cret", withTLS)
			_, srv, _ := startServerStream(t, false, func(c *Config) { c.WebConfig = file })
			if withTLS {
				srv = "https" + strings.TrimPrefix(srv, "http")
			}
			for _, path := range []string{"/api/v1/query?query=1", "/metrics", "/", "/api/v1/logs/search"} {
				get := func(user, pass string) int {
					req, err := http.NewRequest("GET", srv+path, nil)
					if err != nil {
						t.Fatal(err)
					}
					if user != "" {
						req.SetBasicAuth(user, pass)
					}
					resp, err := client.Do(req)
					if err != nil {
						t.Fatalf("GET %s: %v", path, err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					return resp.StatusCode
				}
				if code := get("", ""); code != http.StatusUnauthorized {
					t.Errorf("GET %s without credentials = %d, want 401", path, code)
				}
				if code := get("admin", "wrong"); code != http.StatusUnauthorized {
					t.Errorf("GET %s with a wrong password = %d, want 401", path, code)
				}
				if code := get("admin", "s3cret"); code == http.StatusUnauthorized {
					t.Errorf("GET %s with credentials = 401", path)
				}
			}
			if withTLS {
				// Plain HTTP to the TLS listener gets nothing useful.
				resp, err := http.Get("http" + strings.TrimPrefix(srv, "https") + "/api/v1/query?query=1")
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						t.Fatal("plain HTTP answered 200 by the TLS listener")
					}
				}
			}
		})
	}
}

func TestWebConfigInvalidFailsAtStart(t *testing.T) {
	bad := t.TempDir() + "/web.yml"
	if err := os.WriteFile(bad, []byte("basic_auth_users:\n  admin: not-a-bcrypt-hash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.HTTP, cfg.Data, cfg.WebConfig = "127.0.0.1:0", t.TempDir(), bad
	s, err := New(cfg, nil)
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "web config") {
		t.Fatalf("New with an invalid web config = %v, want a web config error", err)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	_, srv := startServer(t)
	getJSON(t, srv+"/api/v1/query?query=1")
	m := getJSON(t, srv+"/metrics")
	for _, want := range []string{
		"prometheus_tsdb_head_series ",
		"go_goroutines ",
		"process_resident_memory_bytes ",
		"vigil_data_dir_free_bytes ",
		"vigil_data_dir_size_bytes ",
		"vigil_remote_write_samples_received_total 0",
		`vigil_http_requests_total{code="200",handler="/api/v1/query"} 1`,
		`vigil_http_request_duration_seconds_count{handler="/api/v1/query"} 1`,
		"vigil_http_connections ",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestMetricsIngest(t *testing.T) {
	_, srv, _ := startServerStream(t, true)
	m := getJSON(t, srv+"/metrics")
	for _, want := range []string{"vigil_ingest_ticks_total 0", "vigil_ingest_samples_appended_total 0", `vigil_ingest_nodes{state="up"} 0`,
		"vigil_wire_connections 0", "vigil_wire_auth_failures_total 0", "vigil_wire_handshakes 0"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestSelfScrape: the server stores its own metrics under job="vigil" and
// they can be queried like any node's (every interval, at least 1s).
func TestSelfScrape(t *testing.T) {
	s, srv, _ := startServerStream(t, false, func(c *Config) { c.Interval = Duration(20 * time.Millisecond) })
	// A metric with a label named like a target label (the per-node clock
	// gauges have node) is stored with it as exported_node.
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vigil_test_per_node", Help: "test"}, []string{"node"})
	g.WithLabelValues("cn01").Set(7)
	s.reg.MustRegister(g)
	q := url.Values{"query": {`vigil_data_dir_free_bytes{job="vigil",instance="vigil-server",node="vigil-server"}`}}.Encode()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var res struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		body := getJSON(t, srv+"/api/v1/query?"+q)
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatalf("query answer %q: %v", body, err)
		}
		if len(res.Data.Result) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server's own metrics not queryable after 10s: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	q = url.Values{"query": {`vigil_test_per_node{job="vigil",node="vigil-server",exported_node="cn01"}`}}.Encode()
	for !strings.Contains(getJSON(t, srv+"/api/v1/query?"+q), `"7"`) {
		if time.Now().After(deadline) {
			t.Fatal("a metric's own node label not stored as exported_node")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Histograms are stored as Prometheus stores them.
	q = url.Values{"query": {`vigil_http_request_duration_seconds_bucket{job="vigil",le="+Inf"}`}}.Encode()
	for !strings.Contains(getJSON(t, srv+"/api/v1/query?"+q), `"handler":"/api/v1/query"`) {
		if time.Now().After(deadline) {
			t.Fatal("histogram of the query handler not stored")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDefaultHTTPIsLoopback(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(cfg.HTTP)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		t.Fatalf("default --http %q, want a loopback address", cfg.HTTP)
	}
	if cfg.EnableRemoteWriteReceiver {
		t.Fatal("remote-write receiver on by default")
	}
}

// TestHTTPSecurityLogged: the start-up log says which access policy applies.
func TestHTTPSecurityLogged(t *testing.T) {
	for _, tc := range []struct {
		addr, webConfig, want string
		level                 slog.Level
	}{
		{"127.0.0.1:9090", "", "loopback only", slog.LevelInfo},
		{"[::]:9090", "", "open to every peer", slog.LevelWarn},
		{"0.0.0.0:9090", "/etc/vigil/web.yml", "web config", slog.LevelInfo},
	} {
		var buf bytes.Buffer
		s := &Server{cfg: Config{WebConfig: tc.webConfig}, log: slog.New(slog.NewTextHandler(&buf, nil))}
		s.logHTTPSecurity(tc.addr)
		if !strings.Contains(buf.String(), tc.want) || !strings.Contains(buf.String(), "level="+tc.level.String()) {
			t.Errorf("%s web_config=%q logged %q, want %s %q", tc.addr, tc.webConfig, buf.String(), tc.level, tc.want)
		}
	}
}

// BenchmarkScrapeSelf is one self-scrape: gather the registry and append
// it to the store.
func BenchmarkScrapeSelf(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Data = b.TempDir()
	s, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		if err := s.scrapeSelf(now); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMetricsWireAuthFailure: a peer with the wrong key shows on /metrics.
func TestMetricsWireAuthFailure(t *testing.T) {
	keyFile := t.TempDir() + "/key"
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef-server"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, srv, addr := startServerStream(t, true, func(c *Config) { c.KeyFile = keyFile })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Key: []byte("0123456789abcdef-forged"), Name: "forger",
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	counted := regexp.MustCompile(`(?m)^vigil_wire_auth_failures_total [1-9]`)
	for !counted.MatchString(getJSON(t, srv+"/metrics")) {
		if time.Now().After(deadline) {
			t.Fatal("failed authentication not counted in vigil_wire_auth_failures_total")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
