package server

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestLogPatternMetricsStored: syslog messages become vigil_log_* series
// of the server's own node in its store, queryable by PromQL.
func TestLogPatternMetricsStored(t *testing.T) {
	s, srv, _ := startServerStream(t, false, func(c *Config) {
		c.SyslogTCP = "127.0.0.1:0"
		c.LogsMetricsInterval = Duration(50 * time.Millisecond)
	})
	_, addr, _ := s.logs.Addrs()
	conn, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 3 {
		b.WriteString("<11>Jan  5 10:00:00 cn0" + string(rune('1'+i)) + " kernel: mlx5_core 0000:3b:00.0 ib0: link down\n")
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	for _, c := range []struct{ query, want string }{
		{`vigil_log_messages_total{job="vigil",instance="vigil-server",node="vigil-server",app="kernel",severity="err"}`, `"3"`},
		{`vigil_log_pattern_hosts{job="vigil"}`, `"3"`},
		{`vigil_log_new_patterns_total{job="vigil"}`, `"1"`},
	} {
		q := url.Values{"query": {c.query}}.Encode()
		deadline := time.Now().Add(10 * time.Second)
		for body := getJSON(t, srv+"/api/v1/query?"+q); !strings.Contains(body, c.want); body = getJSON(t, srv+"/api/v1/query?"+q) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: want %s, have %s", c.query, c.want, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if md := s.store.Metadata()["vigil_log_messages_total"]; md.Type != "counter" {
		t.Errorf("metadata %+v", md)
	}
}
