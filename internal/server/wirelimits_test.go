package server

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The wire listener's caps are [server] keys and flags, a flag over the
// file, and a negative cap is refused naming the flag.
func TestWireLimitsConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(file, []byte("[server]\nwire_max_conns = 7\nwire_max_handshakes_per_source = 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := parseFlags([]string{"--config", file, "--wire-max-conns", "9", "--wire-max-conns-per-source", "2", "--wire-max-handshakes", "4"})
	if err != nil {
		t.Fatal(err)
	}
	if w := c.WireLimits; w.MaxConns != 9 || w.MaxConnsPerSource != 2 || w.MaxHandshakes != 4 || w.MaxHandshakesPerSource != 3 {
		t.Errorf("wire limits %+v, want 9, 2, 4 (flags) and 3 (file)", w)
	}
	if _, err := parseFlags([]string{"--wire-max-handshakes-per-source", "-1"}); err == nil ||
		!strings.Contains(err.Error(), "--wire-max-handshakes-per-source: must not be negative") {
		t.Errorf("negative cap: %v", err)
	}
}

// A cap lowered by flag refuses the connection beyond it, tells the peer
// why, and counts it on /metrics.
func TestWireCapFlagRefuses(t *testing.T) {
	c, err := parseFlags([]string{"--wire-max-conns", "1"})
	if err != nil {
		t.Fatal(err)
	}
	_, srv, stream := startServerStream(t, true, func(cfg *Config) { cfg.WireLimits = c.WireLimits })
	first, err := net.Dial("tcp", stream)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	metricsShow(t, srv, "vigil_wire_handshakes 1")
	second, err := net.Dial("tcp", stream)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(second)
	if err != nil || !strings.Contains(string(b), "connection limit of the listener reached") {
		t.Errorf("second connection: %q, %v; want a Close naming the listener's limit", b, err)
	}
	metricsShow(t, srv, `vigil_wire_connections_rejected_total{reason="listener_limit"} 1`)
}

// metricsShow waits until the server's /metrics has a line starting with want.
func metricsShow(t *testing.T, srv, want string) {
	t.Helper()
	var m string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m = getJSON(t, srv+"/metrics")
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, want) {
				return
			}
		}
	}
	t.Fatalf("/metrics has no line %q", want)
}
