package iofs

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// scrape reads http://addr/metrics into series -> value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		m[line[:i]] = v
	}
	return m
}

// TestMetricsNoSampler: with nobody on the socket, /metrics shows the
// intervals dropped for that reason, as the stats count them.
func TestMetricsNoSampler(t *testing.T) {
	m := mountCfg(t, filepath.Join(t.TempDir(), "nobody.sock"), func(c *Config) { c.Metrics = "127.0.0.1:0" })
	p := filepath.Join(m.mnt, "f")
	for deadline := time.Now().Add(10 * time.Second); m.Stats().DroppedNoSampler.Load() < 2; time.Sleep(50 * time.Millisecond) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("fewer than 2 intervals dropped in 10 s")
		}
	}
	s := scrape(t, m.MetricsAddr())
	if v := s[`vigil_iofs_dropped_intervals_total{reason="no_sampler"}`]; v < 2 {
		t.Errorf("no_sampler drops = %v, want ≥ 2: %v", v, s)
	}
	if s["vigil_iofs_intervals_total"] != 0 || s["vigil_iofs_connects_total"] != 0 {
		t.Errorf("deliveries without a sampler: %v", s)
	}
}

// TestMetricsFolds: beyond --max-files the operations are folded, and
// /metrics says how many; delivered intervals are counted.
func TestMetricsFolds(t *testing.T) {
	smp := newSampler(t)
	m := mountCfg(t, smp.path, func(c *Config) { c.Metrics = "127.0.0.1:0"; c.MaxFiles = 2 })
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(m.mnt, fmt.Sprint("f", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var s map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s = scrape(t, m.MetricsAddr())
		if s["vigil_iofs_folded_operations_total"] > 0 && s["vigil_iofs_intervals_total"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no folds or deliveries on /metrics in 10 s: %v", s)
		}
	}
	if s["vigil_iofs_connects_total"] != 1 || s[`vigil_iofs_dropped_intervals_total{reason="no_sampler"}`] != 0 {
		t.Errorf("with a sampler: %v", s)
	}
	smp.check()
}
