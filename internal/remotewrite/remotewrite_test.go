package remotewrite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// receiver is a remote-write endpoint that answers with the codes in
// script (then 204) and records the samples of accepted requests.
type receiver struct {
	mu       sync.Mutex
	script   []int
	requests int
	got      []prompb.TimeSeries
	headers  http.Header
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.headers = req.Header.Clone()
	if len(r.script) > 0 {
		code := r.script[0]
		r.script = r.script[1:]
		http.Error(w, "scripted failure", code)
		return
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var wr prompb.WriteRequest
	if err := wr.Unmarshal(raw); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	r.got = append(r.got, wr.Timeseries...)
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) snapshot() (int, []prompb.TimeSeries) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests, append([]prompb.TimeSeries(nil), r.got...)
}

// nopStore accepts everything, or fails with err.
type nopStore struct{ err error }

func (s nopStore) AppendTick(string, time.Time, []*metric.Desc, []float64, bool) error { return s.err }
func (s nopStore) SetUp(string, time.Time, bool) error                                 { return s.err }
func (s nopStore) Gap(string, time.Time, time.Time) error                              { return s.err }

func fastConfig(url string) Config {
	return Config{
		URL: url, MaxSamplesPerSend: 3, BatchSendDeadline: Duration(10 * time.Millisecond),
		MinBackoff: Duration(time.Millisecond), MaxBackoff: Duration(4 * time.Millisecond),
		Headers: map[string]string{"X-Scope-OrgID": "hpc"},
	}
}

func runWriter(t *testing.T, cfgs ...Config) *Writer {
	t.Helper()
	w, err := New(cfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestRetriesUntilAccepted(t *testing.T) {
	rcv := &receiver{script: []int{503, 500}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	w := runWriter(t, fastConfig(srv.URL))
	st := w.Tap(nopStore{})
	d := metric.NewDesc("node_load1", "", metric.Gauge)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 5 {
		if err := st.AppendTick("cn01", base.Add(time.Duration(i)*time.Second), []*metric.Desc{d}, []float64{float64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "5 samples", func() bool { _, got := rcv.snapshot(); return len(got) == 5 })
	_, got := rcv.snapshot()
	for i, ts := range got {
		if labelsOf(ts) != `__name__="node_load1",node="cn01",` || ts.Samples[0].Value != float64(i) ||
			ts.Samples[0].Timestamp != base.UnixMilli()+int64(i)*1000 {
			t.Errorf("sample %d = %s %v, want node_load1{node=cn01} %d at +%ds", i, labelsOf(ts), ts.Samples, i, i)
		}
	}
	waitFor(t, "the sends to be counted", func() bool { return w.Status().Destinations[0].Sent == 5 })
	s := w.Status().Destinations[0]
	if s.Retries != 2 || s.FailedRequests != 2 || s.Sent != 5 || s.Enqueued != 5 || s.DroppedRejected != 0 {
		t.Errorf("status = %+v, want 2 retries, 2 failed requests, 5 sent", s)
	}
	if !strings.Contains(s.LastError, "HTTP 500") {
		t.Errorf("last error %q, want the 500", s.LastError)
	}
	rcv.mu.Lock()
	h := rcv.headers
	rcv.mu.Unlock()
	for k, want := range map[string]string{"Content-Encoding": "snappy", "Content-Type": "application/x-protobuf",
		"X-Prometheus-Remote-Write-Version": "0.1.0", "X-Scope-Orgid": "hpc"} {
		if h.Get(k) != want {
			t.Errorf("header %s = %q, want %q", k, h.Get(k), want)
		}
	}
}

func TestClientErrorDrops(t *testing.T) {
	rcv := &receiver{script: []int{400}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := fastConfig(srv.URL)
	cfg.MaxSamplesPerSend = 2
	w := runWriter(t, cfg)
	st := w.Tap(nopStore{})
	a, b := metric.NewDesc("a", "", metric.Gauge), metric.NewDesc("b", "", metric.Gauge)
	if err := st.AppendTick("cn01", time.UnixMilli(1000), []*metric.Desc{a, b}, []float64{1, 2}, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rejection", func() bool { return w.Status().Destinations[0].DroppedRejected == 2 })
	if err := st.SetUp("cn01", time.UnixMilli(2000), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "up=0", func() bool { _, got := rcv.snapshot(); return len(got) == 1 })
	n, got := rcv.snapshot()
	if n != 2 {
		t.Errorf("%d requests, want 2 (a 4xx is not retried)", n)
	}
	if labelsOf(got[0]) != `__name__="up",node="cn01",` || got[0].Samples[0].Value != 0 {
		t.Errorf("after the 400 got %s %v, want up{node=cn01} 0", labelsOf(got[0]), got[0].Samples)
	}
	// The receiver has the request before the writer has the response and
	// counts it as sent.
	waitFor(t, "the send to be counted", func() bool { return w.Status().Destinations[0].Sent == 1 })
	if s := w.Status().Destinations[0]; s.Retries != 0 || s.Sent != 1 {
		t.Errorf("status = %+v, want no retries and 1 sent", s)
	}
}

func TestTapSkipsRefusedTicks(t *testing.T) {
	w, err := New([]Config{{URL: "http://127.0.0.1:1/api/v1/write"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("out of order")
	st := w.Tap(nopStore{err: refused})
	d := metric.NewDesc("a", "", metric.Gauge)
	if err := st.AppendTick("cn01", time.Now(), []*metric.Desc{d}, []float64{1}, false); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the store's", err)
	}
	s := w.Status()
	if s.SkippedTicks != 1 || s.Destinations[0].QueueLength != 0 {
		t.Errorf("status = %+v, want 1 skipped tick and an empty queue", s)
	}
}

func TestQueueFullDropsOldest(t *testing.T) {
	// Not running: nothing is sent, the ring overflows.
	w, err := New([]Config{{URL: "http://127.0.0.1:1/", QueueCapacity: 4, MaxSamplesPerSend: 10, MaxShards: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := metric.NewDesc("a", "", metric.Gauge)
	for i := range 10 {
		w.add("cn01", int64(i), []*metric.Desc{d}, []float64{float64(i)})
	}
	q := w.queues[0]
	s := q.status()
	if s.QueueLength != 4 || s.DroppedFull != 6 || s.Enqueued != 10 {
		t.Fatalf("status = %+v, want 4 queued, 6 dropped", s)
	}
	b := q.drain()
	for i, smp := range b {
		if smp.t != int64(6+i) {
			t.Errorf("queued[%d] at %d, want %d (the newest kept)", i, smp.t, 6+i)
		}
	}
}

func TestSeriesCacheBounded(t *testing.T) {
	w, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.queues = []*queue{newQueue(Config{URL: "http://x/", QueueCapacity: 8}, w.log)}
	w.maxSeries = 3
	for i := range 10 {
		w.add("cn01", 1, []*metric.Desc{metric.NewDesc("m", "", metric.Gauge, "i", string(rune('a'+i)))}, []float64{1})
		if len(w.series) > 3 {
			t.Fatalf("cache holds %d series, bound 3", len(w.series))
		}
	}
}

// TestTickLabels: the tick path's per-node cache gives every value its
// own series' labels across schema changes, and stays bounded.
func TestTickLabels(t *testing.T) {
	w, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Job = "node"
	w.queues = []*queue{newQueue(Config{URL: "http://x/", QueueCapacity: 64, MaxShards: 1}, w.log)}
	w.maxSeries = 4
	a := metric.NewDesc("a", "", metric.Gauge)
	b := metric.NewDesc("b", "", metric.Gauge, "k", "v")
	c := metric.NewDesc("c", "", metric.Counter)
	ticks := []struct {
		node  string
		descs []*metric.Desc
	}{
		{"cn01", []*metric.Desc{a, b}},
		{"cn01", []*metric.Desc{a, b}},
		{"cn02", []*metric.Desc{a, b}},
		{"cn01", []*metric.Desc{b, nil, c}}, // a schema change; an unnamed value
		{"cn01", []*metric.Desc{a, b}},
		{"cn03", []*metric.Desc{c}},
	}
	for k, tk := range ticks {
		w.addTick(tk.node, int64(k), tk.descs, make([]float64, len(tk.descs)), false)
		if w.cached > w.maxSeries+len(tk.descs) {
			t.Fatalf("tick %d: cache holds %d label sets, bound %d", k, w.cached, w.maxSeries)
		}
		var want []byte
		for _, d := range tk.descs {
			if d != nil {
				want = appendTargetLabels(want, "node", tk.node, d)
			}
		}
		var got []byte
		for _, smp := range w.queues[0].drain() {
			got = append(got, smp.labels...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("tick %d (%s): labels %q, want %q", k, tk.node, got, want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "url: empty"},
		{Config{URL: "ftp://x/"}, "scheme must be http or https"},
		{Config{URL: "http:///api"}, "no host"},
		{Config{URL: "http://h/", QueueCapacity: -1}, "must not be negative"},
		{Config{URL: "http://h/", MinBackoff: Duration(time.Second), MaxBackoff: Duration(time.Millisecond)}, "exceeds max_backoff"},
		{Config{URL: "https://h:9/api/v1/write"}, ""},
	} {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestStatusHandler(t *testing.T) {
	w, err := New([]Config{{URL: "http://user:secret@h/w", Name: "lts"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	w.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/status/remote_write", nil))
	var got struct {
		Status string
		Data   Status
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "success" || len(got.Data.Destinations) != 1 || got.Data.Destinations[0].Name != "lts" ||
		got.Data.Destinations[0].QueueCapacity != DefaultQueueCapacity {
		t.Errorf("status = %s", rec.Body)
	}
	if strings.Contains(rec.Body.String(), "secret") {
		t.Errorf("status shows the password: %s", rec.Body)
	}
}

// TestFlushOnShutdown: samples still queued when the server stops are sent
// once more, within DefaultFlushTimeout.
func TestFlushOnShutdown(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	w, err := New([]Config{{URL: srv.URL, BatchSendDeadline: Duration(time.Hour), MaxSamplesPerSend: 1000}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	d := metric.NewDesc("a", "", metric.Gauge)
	for i := range 3 {
		w.add("cn01", int64(i), []*metric.Desc{d}, []float64{float64(i)})
	}
	if n, _ := rcv.snapshot(); n != 0 {
		t.Fatalf("%d requests before the deadline or a full batch", n)
	}
	cancel()
	<-done
	if _, got := rcv.snapshot(); len(got) != 3 {
		t.Errorf("flushed %d samples at shutdown, want 3", len(got))
	}
}

// drain takes every queued sample, partition by partition.
func (q *queue) drain() []sample {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []sample
	for i := range q.parts {
		p := &q.parts[i]
		for j := range p.n {
			out = append(out, p.ring[(p.head+j)%len(p.ring)])
		}
		clear(p.ring)
		p.head, p.n = 0, 0
	}
	q.queued = 0
	return out
}
