package samplerd

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestWebConfig: with --web-config the sampler's /metrics answers 401
// without credentials and serves over TLS with them.
func TestWebConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	file, client := testutil.WebConfig(t, "prom", "secret", true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--root", fixture, "--node", "n1", "--plugins", "load", "--interval", "100ms",
			"--listen", addr, "--web-config", file, "--gomaxprocs", "0", "--log-level", "warn"}, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v\n%s", err, stderr.String())
		}
	}()
	get := func(auth bool) (int, string, error) {
		req, _ := http.NewRequest("GET", "https://"+addr+"/metrics", nil)
		if auth {
			req.SetBasicAuth("prom", "secret")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := get(true)
		if err == nil && code == http.StatusOK && strings.Contains(body, `node_load1{node="n1"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no metrics with credentials after 10s: %d %v %.200q\n%s", code, err, body, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _, err := get(false); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without credentials = %d %v, want 401", code, err)
	}
}

func TestWebConfigInvalid(t *testing.T) {
	err := run(context.Background(), []string{"--root", fixture, "--listen", "127.0.0.1:0", "--web-config", "/nonexistent/web.yml", "--gomaxprocs", "0"},
		io.Discard)
	if err == nil || !strings.Contains(err.Error(), "web config") {
		t.Fatalf("Run with a missing web config = %v, want a web config error", err)
	}
}
