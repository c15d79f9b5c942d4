package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/remotewrite"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/wire"
)

var base = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// startServer serves a fresh store on a loopback port until the test ends.
func startServer(t *testing.T) (*Server, string) {
	s, srv, _ := startServerStream(t, false)
	return s, srv
}

// startServerStream also listens for the tree's stream if stream is set
// and returns that address.
func startServerStream(t *testing.T, stream bool, mods ...func(*Config)) (*Server, string, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Data = t.TempDir()
	for _, m := range mods {
		m(&cfg)
	}
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var streamLn net.Listener
	streamAddr := ""
	if stream {
		if streamLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		streamAddr = streamLn.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, streamLn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String(), streamAddr
}

func encodeWrite(t *testing.T, req *prompb.WriteRequest) []byte {
	t.Helper()
	raw, err := req.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, raw)
}

func postWrite(t *testing.T, srv string, body []byte, contentType string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", srv+"/api/v1/write", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func series(name string, lbls []string, pts ...[2]float64) prompb.TimeSeries {
	ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}}}
	for i := 0; i+1 < len(lbls); i += 2 {
		ts.Labels = append(ts.Labels, prompb.Label{Name: lbls[i], Value: lbls[i+1]})
	}
	for _, p := range pts {
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: int64(p[0]), Value: p[1]})
	}
	return ts
}

// receiverOn turns the remote-write receiver on (it is off by default).
func receiverOn(c *Config) { c.EnableRemoteWriteReceiver = true }

func TestRemoteWriteRoundTrip(t *testing.T) {
	_, srv, _ := startServerStream(t, false, receiverOn)
	ms := float64(base.UnixMilli())
	req := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{
			// Labels deliberately unsorted: the receiver must sort them.
			series("node_memory_MemFree_bytes", []string{"job", "node", "instance", "cn01:9100"}, [2]float64{ms, 1024}, [2]float64{ms + 15000, 2048}),
			series("http_requests_total", []string{"code", "200"}, [2]float64{ms, 7}),
		},
		Metadata: []prompb.MetricMetadata{{Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "http_requests_total", Help: "Requests.", Unit: "requests"}},
	}
	code, body := postWrite(t, srv, encodeWrite(t, req), "application/x-protobuf")
	if code != http.StatusNoContent {
		t.Fatalf("write: %d %s", code, body)
	}
	at := strconv.FormatInt(base.Unix()+15, 10)
	got := getJSON(t, srv+"/api/v1/query?time="+at+"&query="+url.QueryEscape("node_memory_MemFree_bytes"))
	want := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"node_memory_MemFree_bytes","instance":"cn01:9100","job":"node"},"value":[` + at + `,"2048"]}]}}`
	if got != want {
		t.Errorf("query after write:\n%s\nwant\n%s", got, want)
	}
	got = getJSON(t, srv+"/api/v1/metadata?metric=http_requests_total")
	if want := `{"status":"success","data":{"http_requests_total":[{"type":"counter","help":"Requests.","unit":"requests"}]}}`; got != want {
		t.Errorf("metadata: %s", got)
	}
}

// TestRemoteWriteForwarded: what outside agents write in reaches the
// remote-write destinations too, with its own labels; refused samples and
// series do not.
func TestRemoteWriteForwarded(t *testing.T) {
	var mu sync.Mutex
	var got []prompb.TimeSeries
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		raw, err := snappy.Decode(nil, body)
		var wr prompb.WriteRequest
		if err == nil {
			err = wr.Unmarshal(raw)
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		got = append(got, wr.Timeseries...)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer dest.Close()
	_, srv, _ := startServerStream(t, false, receiverOn, func(c *Config) {
		c.RemoteWrite = &[]remotewrite.Config{{URL: dest.URL, BatchSendDeadline: remotewrite.Duration(20 * time.Millisecond)}}
	})
	ms := float64(base.UnixMilli())
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series("node_cpu_seconds_total", []string{"cpu", "0", "mode", "user", "instance", "cn07:9100"}, [2]float64{ms, 12.34}, [2]float64{ms + 1000, 12.5}),
		series("", []string{"job", "x"}, [2]float64{ms, 1}),
	}}
	if code, body := postWrite(t, srv, encodeWrite(t, req), "application/x-protobuf"); code != http.StatusBadRequest {
		t.Fatalf("write with one bad series: %d %s", code, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("forwarded %d series, want 2: %v", len(got), got)
	}
	want := `{__name__="node_cpu_seconds_total", cpu="0", instance="cn07:9100", mode="user"}`
	for i, ts := range got {
		var b labels.ScratchBuilder
		for _, l := range ts.Labels {
			b.Add(l.Name, l.Value)
		}
		if ls := b.Labels().String(); ls != want || len(ts.Samples) != 1 || ts.Samples[0].Value != []float64{12.34, 12.5}[i] {
			t.Errorf("forwarded %d: %s %v", i, ls, ts.Samples)
		}
	}
}

func TestRemoteWriteErrors(t *testing.T) {
	s, srv, _ := startServerStream(t, false, receiverOn)
	ms := float64(base.UnixMilli())
	good := encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("a", nil, [2]float64{ms + 1000, 1})}})
	if code, body := postWrite(t, srv, good, "application/x-protobuf"); code != 204 {
		t.Fatalf("good write: %d %s", code, body)
	}
	for _, tc := range []struct {
		name, ct string
		body     []byte
		code     int
		want     string
	}{
		{"not snappy", "application/x-protobuf", []byte("\xff\xff\xff\xff\xff\xffgarbage"), 400, "snappy"},
		{"not protobuf", "application/x-protobuf", snappy.Encode(nil, []byte("\x0a\xff\xff\xff\xff\x0f")), 400, "decode WriteRequest"},
		{"json", "application/json", good, 415, "content type"},
		{"remote write 2.0", "application/x-protobuf;proto=io.prometheus.write.v2.Request", good, 415, "not supported"},
		{"no metric name", "application/x-protobuf", encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			{Labels: []prompb.Label{{Name: "job", Value: "x"}}, Samples: []prompb.Sample{{Timestamp: int64(ms), Value: 1}}}}}), 400, "no metric name"},
		{"duplicate label", "application/x-protobuf", encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series("b", []string{"x", "1", "x", "2"}, [2]float64{ms, 1})}}), 400, `duplicate label "x"`},
		{"out of order", "application/x-protobuf", encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series("a", nil, [2]float64{ms, 9}), series("c", nil, [2]float64{ms, 3})}}), 400, "out of order"},
		{"store's own label", "application/x-protobuf", encodeWrite(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
			series("node_load1", []string{"__vigil_unscaled__", "1"}, [2]float64{ms, 1})}}), 400, "reserved"},
	} {
		code, body := postWrite(t, srv, tc.body, tc.ct)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	// The valid series of the rejected request was still stored.
	at := strconv.FormatInt(base.Unix()+1, 10)
	if got := getJSON(t, srv+"/api/v1/query?time="+at+"&query=c"); !strings.Contains(got, `"value":[`+at+`,"3"]`) {
		t.Errorf("series c after partial rejection: %s", got)
	}
	if stored, rejected := s.rw.Stats(); stored != 2 || rejected != 4 {
		t.Errorf("stats stored=%d rejected=%d, want 2 and 4", stored, rejected)
	}
}

func FuzzDecodeWriteRequest(f *testing.F) {
	raw, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("a", []string{"b", "c"}, [2]float64{1, 2})}}).Marshal()
	f.Add(snappy.Encode(nil, raw))
	f.Add([]byte{})
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req prompb.WriteRequest
		if err := decodeWriteRequest(body, &req); err != nil {
			return
		}
		for _, ts := range req.Timeseries {
			_ = len(ts.Labels) + len(ts.Samples)
		}
	})
}

func TestServeShutsDownAndClosesStore(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Data = dir
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store().AppendTick("cn01", base, []*metric.Desc{metric.NewDesc("m", "", metric.Gauge)}, []float64{1}, false); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil) }()
	if got := getJSON(t, "http://"+ln.Addr().String()+"/-/healthy"); !strings.Contains(got, "Healthy") {
		t.Errorf("healthy: %q", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	// Closed cleanly: the directory opens again with the data in it.
	s2, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if st := s2.Store().Stats(); st.HeadSeries != 1 {
		t.Errorf("after restart: %d series, want 1", st.HeadSeries)
	}
}

func TestConfig(t *testing.T) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	wantErr := map[string]string{
		"unknown_key.bad.toml":  `unknown_key.bad.toml:2:1: unknown key "server.retenion"`,
		"bad_duration.bad.toml": `invalid duration "15 days"`,
		"negative.bad.toml":     "query_max_samples: must not be negative",
		"not_table.bad.toml":    "server: want a table",
		"syntax.bad.toml":       "syntax.bad.toml",
		"job_self.bad.toml":     `job_self.bad.toml:3: server.job: "vigil": want at most 128 bytes of UTF-8, not "vigil"`,
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			cfg, err := LoadConfig(f)
			if strings.HasSuffix(f, ".good.toml") {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want, ok := wantErr[filepath.Base(f)]
			if !ok {
				t.Fatalf("no expected error listed for %s", f)
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("err = %v, want it to contain %q (cfg %+v)", err, want, cfg)
			}
		})
	}
	cfg, err := LoadConfig("testdata/full.good.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{HTTP: "127.0.0.1:9999", Data: "/var/lib/vigil", Interval: Duration(time.Second), Retention: Duration(30 * 24 * time.Hour),
		RetentionBytes: 1 << 30, QueryTimeout: Duration(30 * time.Second), QueryMaxSamples: 1000, QueryMaxConcurrent: 4}
	want.WebConfig, want.EnableRemoteWriteReceiver, want.Job = "/etc/vigil/web.yml", true, DefaultJob
	if cfg != want {
		t.Errorf("full config = %+v, want %+v", cfg, want)
	}
	cfg, err = LoadConfig("testdata/sampler_only.good.toml")
	if err != nil || cfg != DefaultConfig() {
		t.Errorf("file without [server]: %+v, %v; want defaults", cfg, err)
	}
}

// TestPromtool drives the server with the real promtool, as an operator's
// tooling would.
func TestPromtool(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	promtool := testutil.LookPeer(t, "promtool", "apt-get install prometheus")
	s, srv := startServer(t)
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	for i := range 4 {
		ts := base.Add(time.Duration(i) * 10 * time.Second)
		for n, node := range []string{"cn01", "cn02"} {
			if err := s.Store().AppendTick(node, ts, []*metric.Desc{load}, []float64{float64(i*10 + n)}, false); err != nil {
				t.Fatal(err)
			}
			if err := s.Store().SetUp(node, ts, n == 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	t30 := strconv.FormatInt(base.Unix()+30, 10)
	out, err := exec.Command(promtool, "query", "instant", "--time="+t30, srv, "up").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool query instant: %v\n%s", err, out)
	}
	want := fmt.Sprintf("up{instance=\"cn01\", job=\"node\", node=\"cn01\"} => 1 @[%s]\nup{instance=\"cn02\", job=\"node\", node=\"cn02\"} => 0 @[%s]\n", t30, t30)
	if string(out) != want {
		t.Errorf("promtool query instant:\n%s\nwant\n%s", out, want)
	}
	out, err = exec.Command(promtool, "query", "range", "--start="+strconv.FormatInt(base.Unix(), 10), "--end="+t30, "--step=10s",
		srv, `node_load1{node="cn02"}`).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool query range: %v\n%s", err, out)
	}
	var wantR strings.Builder
	wantR.WriteString("node_load1{instance=\"cn02\", job=\"node\", node=\"cn02\"} =>\n")
	for i := range 4 {
		fmt.Fprintf(&wantR, "%d @[%d]\n", i*10+1, base.Unix()+int64(i)*10)
	}
	if string(out) != wantR.String() {
		t.Errorf("promtool query range:\n%s\nwant\n%s", out, wantR.String())
	}
	// A bad query is reported by promtool as the server's error.
	out, err = exec.Command(promtool, "query", "instant", srv, "sum(").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bad_data") {
		t.Errorf("promtool with a bad query: err=%v out=%s, want failure naming bad_data", err, out)
	}
	// The JSON the server answers is what vigil query reads too.
	c := &query.Client{Server: srv}
	resp, err := c.Instant(context.Background(), "count(up == 1)", base.Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Result []json.RawMessage }
	if err := json.Unmarshal(resp.Data, &d); err != nil || len(d.Result) != 1 {
		t.Errorf("client result %s: %v", resp.Data, err)
	}
}

// TestStream feeds the server through --listen with a wire client, as a
// sampler or aggregator does.
func TestStream(t *testing.T) {
	_, srv, addr := startServerStream(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "agg1", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Run(ctx) }()
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	now := time.Now().Truncate(time.Second)
	for i, node := range []string{"cn01", "cn02"} {
		var b metric.Batch
		b.Reset(now)
		b.Add(load, float64(i)+0.5)
		c.Tick(c.NewStream(node), b.Time, b.Descs, b.Values)
	}
	at := strconv.FormatInt(now.Unix(), 10)
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = getJSON(t, srv+"/api/v1/query?time="+at+"&query="+url.QueryEscape("node_load1 and on(node) up == 1"))
		if strings.Count(got, `"node_load1"`) == 2 {
			break
		}
	}
	for i, node := range []string{"cn01", "cn02"} {
		want := fmt.Sprintf(`{"metric":{"__name__":"node_load1","instance":%q,"job":"node","node":%q},"value":[%s,"%g"]}`, node, node, at, float64(i)+0.5)
		if !strings.Contains(got, want) {
			t.Errorf("after streaming: %s\nwant it to contain %s", got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"15d", 15 * 24 * time.Hour, true},
		{"1h30m", 90 * time.Minute, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"100ms", 100 * time.Millisecond, true},
		{"-1s", 0, false},
		{"soon", 0, false},
	} {
		var d Duration
		err := d.Set(tc.in)
		if (err == nil) != tc.ok || d.D() != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v ok=%v", tc.in, d.D(), err, tc.want, tc.ok)
		}
	}
}

// A missing key file fails New, before any store opens or socket binds.
func TestServeMissingKeyFile(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Data = t.TempDir()
	cfg.KeyFile = filepath.Join(t.TempDir(), "absent.key")
	s, err := New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "stream key") || !strings.Contains(err.Error(), "absent.key") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("err = %v, want it to name the stream key file", err)
	}
	cfg.KeyFile = ""
	s2, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("store still locked: %v", err)
	}
	s2.Close()
}

// A store that cannot write (here: less free space than min_free_bytes)
// still answers queries, says why it is read-only, and answers remote
// write with 503, which senders retry, instead of losing the samples.
func TestReadOnlyStore(t *testing.T) {
	_, srv, _ := startServerStream(t, false, receiverOn, func(c *Config) { c.MinFreeBytes = 1 << 62 })
	ms := float64(base.UnixMilli())
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("x", nil, [2]float64{ms, 1})}}
	code, body := postWrite(t, srv, encodeWrite(t, req), "application/x-protobuf")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "disk_full") {
		t.Errorf("remote write to a read-only store: %d %s; want 503 disk_full", code, body)
	}
	got := getJSON(t, srv+"/api/v1/status/store")
	if !strings.Contains(got, `"writable":false,"reason":"disk_full"`) {
		t.Errorf("store status: %s", got)
	}
	if got := getJSON(t, srv+"/-/ready"); !strings.Contains(got, "Read-only: ") {
		t.Errorf("ready: %s", got)
	}
	if got := getJSON(t, srv+"/api/v1/query?query=up"); !strings.Contains(got, `"status":"success"`) {
		t.Errorf("query on a read-only store: %s", got)
	}
}

// The server restarts on a full disk: it serves what it had, read-only,
// and takes writes again once space returns, without a restart.
func TestRestartOnFullDisk(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Data = testutil.TmpFS(t, 64<<20)
	cfg.MinFreeBytes = 8 << 20
	cfg.EnableRemoteWriteReceiver = true
	start := func() (string, func()) {
		s, err := New(cfg, nil)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Serve(ctx, ln, nil) }()
		return "http://" + ln.Addr().String(), func() {
			cancel()
			if err := <-done; err != nil {
				t.Logf("serve: %v", err)
			}
		}
	}
	ms := float64(time.Now().Add(-time.Minute).UnixMilli())
	write := func(srv string, v float64) int {
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series("x", nil, [2]float64{ms + v*1000, v})}}
		code, _ := postWrite(t, srv, encodeWrite(t, req), "application/x-protobuf")
		return code
	}
	srv, stop := start()
	if code := write(srv, 1); code != http.StatusNoContent {
		t.Fatalf("write: %d", code)
	}
	stop()
	filler := testutil.Fill(t, cfg.Data, "filler")
	srv, stop = start()
	defer stop()
	at := strconv.FormatFloat(ms/1000+1, 'f', 3, 64)
	if got := getJSON(t, srv+"/api/v1/query?query=x&time="+at); !strings.Contains(got, `"1"]`) {
		t.Errorf("query after a restart on a full disk: %s", got)
	}
	if got := getJSON(t, srv+"/api/v1/status/store"); !strings.Contains(got, `"writable":false`) {
		t.Errorf("store status on a full disk: %s", got)
	}
	if code := write(srv, 2); code != http.StatusServiceUnavailable {
		t.Errorf("write on a full disk: %d, want 503", code)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(getJSON(t, srv+"/api/v1/status/store"), `"writable":true`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("store not writable after space returned")
		}
	}
	if code := write(srv, 3); code != http.StatusNoContent {
		t.Errorf("write after space returned: %d", code)
	}
}
