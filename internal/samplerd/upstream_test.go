package samplerd

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// TestUpstreamMetrics: /metrics shows the stream to the upstream: connected
// with ticks and bytes sent while a receiver runs, then disconnected with
// failed dials once it is gone.
func TestUpstreamMetrics(t *testing.T) {
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopReceiver := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = wire.Serve(rctx, rln, wire.ServerOptions{Log: slog.New(slog.DiscardHandler)}, wire.Discard{})
	}()
	defer func() { stopReceiver(); <-served }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--root", fixture, "--node", "n1", "--plugins", "load", "--interval", "100ms",
			"--listen", addr, "--upstream", rln.Addr().String(), "--gomaxprocs", "0", "--log-level", "error"}, &stderr)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v\n%s", err, stderr.String())
		}
	}()
	value := func(body, name string) (float64, bool) {
		m := regexp.MustCompile(`(?m)^` + name + `\{node="n1"\} (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			return 0, false
		}
		v, err := strconv.ParseFloat(m[1], 64)
		return v, err == nil
	}
	// until polls /metrics until ok holds of its values, for up to 10 s.
	until := func(what string, ok func(v map[string]float64) bool) map[string]float64 {
		t.Helper()
		names := []string{"vigil_sampler_upstream_connected", "vigil_sampler_upstream_connects_total",
			"vigil_sampler_upstream_dial_failures_total", "vigil_sampler_upstream_ticks_total",
			"vigil_sampler_upstream_ticks_dropped_total", "vigil_sampler_upstream_bytes_sent_total",
			"vigil_sampler_upstream_buffer_bytes"}
		var body string
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			v := map[string]float64{}
			for _, n := range names {
				if x, found := value(body, n); found {
					v[n] = x
				}
			}
			if len(v) == len(names) && ok(v) {
				return v
			}
		}
		t.Fatalf("%s: not within 10 s; last /metrics:\n%s\n%s", what, body, stderr.String())
		return nil
	}
	v := until("connected, ticks and bytes sent", func(v map[string]float64) bool {
		return v["vigil_sampler_upstream_connected"] == 1 && v["vigil_sampler_upstream_connects_total"] >= 1 &&
			v["vigil_sampler_upstream_ticks_total"] >= 3 && v["vigil_sampler_upstream_bytes_sent_total"] > 0
	})
	if v["vigil_sampler_upstream_ticks_dropped_total"] != 0 || v["vigil_sampler_upstream_dial_failures_total"] != 0 {
		t.Errorf("a reachable upstream: %v", v)
	}
	stopReceiver()
	<-served
	until("disconnected, dials failing", func(v map[string]float64) bool {
		return v["vigil_sampler_upstream_connected"] == 0 && v["vigil_sampler_upstream_dial_failures_total"] >= 1
	})
}
