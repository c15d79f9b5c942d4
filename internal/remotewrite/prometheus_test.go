package remotewrite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/remotewrite"
	"github.com/vigil-hpc/vigil/internal/server"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/wire"
)

const prometheusBin = "/usr/bin/prometheus"

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startPrometheus runs the Debian Prometheus with its remote-write
// receiver on until the test ends and returns its base URL.
func startPrometheus(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(prometheusBin); err != nil {
		testutil.MissingPeer(t, "%s not installed (apt-get install prometheus): %v", prometheusBin, err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1h\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var out testutil.SyncBuffer
	cmd := exec.Command(prometheusBin, "--web.enable-remote-write-receiver", "--config.file="+cfg,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", out.String())
		default:
		}
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s:\n%s", out.String())
		}
	}
}

type promVector struct {
	Status string
	Error  string
	Data   struct {
		Result []struct {
			Metric map[string]string
			Value  [2]any
		}
	}
}

func promQuery(t *testing.T, base, expr string, at time.Time) promVector {
	t.Helper()
	u := base + "/api/v1/query?query=" + url.QueryEscape(expr) + fmt.Sprintf("&time=%.3f", float64(at.UnixMilli())/1000)
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var v promVector
	if err := json.Unmarshal(body, &v); err != nil || v.Status != "success" {
		t.Fatalf("query %s: %s (%v)", expr, body, err)
	}
	return v
}

// TestPrometheus sends the tree's ticks through `vigil server
// --remote-write` into a real Prometheus and reads them back there.
func TestPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	prom := startPrometheus(t)
	httpAddr, streamAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var vlog testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		cfg := server.DefaultConfig()
		cfg.HTTP, cfg.Listen, cfg.Data = httpAddr, streamAddr, t.TempDir()
		cfg.RemoteWrite = &[]remotewrite.Config{{URL: prom + "/api/v1/write"}}
		s, err := server.New(cfg, slog.New(slog.NewTextHandler(&vlog, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			done <- err
			return
		}
		done <- s.Run(ctx)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("vigil server: %v", err)
		}
		if t.Failed() {
			t.Logf("vigil server log:\n%s", vlog.String())
		}
	}()

	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{streamAddr}, Name: "agg1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(wctx) }()
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	cpu := metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", "0", "mode", "idle")
	start := time.Now().Add(-10 * time.Second).Truncate(time.Second)
	nodes := []string{"cn01", "cn02"}
	streams := []*wire.ClientStream{c.NewStream(nodes[0]), c.NewStream(nodes[1])}
	const ticks = 5
	for k := range ticks {
		for i := range nodes {
			var b metric.Batch
			b.Reset(start.Add(time.Duration(k) * time.Second))
			b.Add(load, float64(10*i+k)+0.5)
			b.Add(cpu, float64(100*i+k))
			c.Tick(streams[i], b.Time, b.Descs, b.Values)
		}
	}
	last := start.Add((ticks - 1) * time.Second)
	var got promVector
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got = promQuery(t, prom, "count_over_time(node_load1[1m])", last)
		if len(got.Data.Result) == 2 && got.Data.Result[0].Value[1] == fmt.Sprint(ticks) && got.Data.Result[1].Value[1] == fmt.Sprint(ticks) {
			break
		}
	}
	if len(got.Data.Result) != 2 {
		t.Fatalf("prometheus has %d node_load1 series, want 2: %+v", len(got.Data.Result), got)
	}
	// Every tick's value, with the node label, at its own timestamp.
	for k := range ticks {
		at := start.Add(time.Duration(k) * time.Second)
		for _, q := range []struct {
			expr string
			want func(i int) string
		}{
			{"node_load1", func(i int) string { return fmt.Sprint(float64(10*i+k) + 0.5) }},
			{`node_cpu_seconds_total{cpu="0",mode="idle"}`, func(i int) string { return fmt.Sprint(100*i + k) }},
			{"up", func(int) string { return "1" }},
		} {
			v := promQuery(t, prom, q.expr, at)
			sort.Slice(v.Data.Result, func(a, b int) bool { return v.Data.Result[a].Metric["node"] < v.Data.Result[b].Metric["node"] })
			if len(v.Data.Result) != 2 {
				t.Fatalf("%s at tick %d: %d series, want 2: %+v", q.expr, k, len(v.Data.Result), v)
			}
			for i, r := range v.Data.Result {
				if r.Metric["node"] != nodes[i] || r.Value[1] != q.want(i) {
					t.Errorf("%s at tick %d: got %v = %v, want node=%s value %s", q.expr, k, r.Metric, r.Value[1], nodes[i], q.want(i))
				}
			}
		}
	}

	// The sender's own counters.
	resp, err := http.Get("http://" + httpAddr + "/api/v1/status/remote_write")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var st struct {
		Data struct {
			Destinations []struct {
				URL                 string
				SamplesSent         uint64 `json:"samples_sent"`
				SamplesDroppedTotal uint64 `json:"samples_dropped_rejected"`
			}
		}
	}
	if err := json.Unmarshal(body, &st); err != nil || len(st.Data.Destinations) != 1 {
		t.Fatalf("status: %s (%v)", body, err)
	}
	d := st.Data.Destinations[0]
	// 2 nodes × 5 ticks × (2 series + up), and the server's per-node
	// clock series (vigil_node_clock_offset_seconds, vigil_node_clock_skew)
	// once per interval on top.
	if d.SamplesSent <= 2*ticks*3 || d.SamplesDroppedTotal != 0 || !strings.HasPrefix(d.URL, prom) {
		t.Errorf("status = %s, want more than %d samples sent to %s", body, 2*ticks*3, prom)
	}
	// The clock series reach Prometheus as the nodes' own.
	var v promVector
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if v = promQuery(t, prom, `vigil_node_clock_offset_seconds{job="node"}`, time.Now()); len(v.Data.Result) == 2 {
			break
		}
	}
	if len(v.Data.Result) != 2 || v.Data.Result[0].Metric["job"] != "node" {
		t.Errorf("vigil_node_clock_offset_seconds in prometheus: %+v, want 2 series of job=node", v.Data.Result)
	}
}

// TestServerConfig reads remote_write from the [server] table.
func TestServerConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte(`[server]
remote_write = [
  { url = "http://lts:9090/api/v1/write", name = "lts", queue_capacity = 5000, batch_send_deadline = "5s", headers = { "X-Scope-OrgID" = "hpc" } },
  { url = "https://backup/api/v1/write" },
]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := server.LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RemoteWrite == nil || len(*cfg.RemoteWrite) != 2 {
		t.Fatalf("remote_write = %+v, want 2 destinations", cfg.RemoteWrite)
	}
	rw := (*cfg.RemoteWrite)[0]
	if rw.URL != "http://lts:9090/api/v1/write" || rw.Name != "lts" || rw.QueueCapacity != 5000 ||
		rw.BatchSendDeadline.D() != 5*time.Second || rw.Headers["X-Scope-OrgID"] != "hpc" {
		t.Errorf("first destination = %+v", rw)
	}
	for name, tc := range map[string]struct{ toml, want string }{
		"scheme":  {`remote_write = [{ url = "ftp://x/" }]`, "remote_write[0]: url \"ftp://x/\": scheme must be http or https"},
		"unknown": {`remote_write = [{ url = "http://x/", retries = 3 }]`, "retries"},
	} {
		p := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(p, []byte("[server]\n"+tc.toml+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := server.LoadConfig(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}
