package aggregator

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The wire listener's caps are [aggregator] keys and flags, a flag over
// the file, and a negative cap is refused naming the flag.
func TestWireLimitsConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(file, []byte("[aggregator]\nwire_max_conns = 7\nwire_max_handshakes_per_source = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := parseFlags([]string{"--config", file, "--wire-max-conns", "9", "--wire-max-conns-per-source", "2", "--wire-max-handshakes", "4"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.Config(quiet())
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.WireLimits; w.MaxConns != 9 || w.MaxConnsPerSource != 2 || w.MaxHandshakes != 4 || w.MaxHandshakesPerSource != 3 {
		t.Errorf("wire limits %+v, want 9, 2, 4 (flags) and 3 (file)", w)
	}
	if _, err := parseFlags([]string{"--wire-max-conns", "-1"}); err == nil ||
		!strings.Contains(err.Error(), "--wire-max-conns: must not be negative") {
		t.Errorf("negative cap: %v", err)
	}
}

// A cap lowered by flag refuses the connection beyond it, tells the peer
// why, and counts it on /metrics.
func TestWireCapFlagRefuses(t *testing.T) {
	up := listen(t)
	up.Close() // refused at once: the client's handshake cannot hold up shutdown
	s, err := parseFlags([]string{"--wire-max-conns-per-source", "1", "--listen", "127.0.0.1:0", "--http", "none",
		"--upstream", up.Addr().String(), "--name", "agg-cap"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s.Config(quiet())
	if err != nil {
		t.Fatal(err)
	}
	agg, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agg.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "listening", 5*time.Second, func() bool { return agg.Addr() != "" })
	first, err := net.Dial("tcp", agg.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	waitFor(t, "first connection in the handshake", 5*time.Second, func() bool { return agg.wstats.Handshaking.Load() == 1 })
	second, err := net.Dial("tcp", agg.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(second)
	if err != nil || !strings.Contains(string(b), "connection limit per source address reached") {
		t.Errorf("second connection: %q, %v; want a Close naming the per-source limit", b, err)
	}
	srv := httptest.NewServer(agg.Handler())
	defer srv.Close()
	waitFor(t, "the refusal on /metrics", 5*time.Second, func() bool {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "vigil_wire_connections_rejected_total{") && strings.Contains(l, `reason="source_limit"`) {
				return strings.HasSuffix(l, " 1")
			}
		}
		return false
	})
}
