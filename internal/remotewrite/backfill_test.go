package remotewrite

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

// strictReceiver takes samples as Prometheus without an out-of-order
// window does: a request with a sample not newer than its series' last is
// refused whole (400). While down it answers 503.
type strictReceiver struct {
	down atomic.Bool
	mu   sync.Mutex
	last map[string]int64
	got  map[string][]prompb.Sample
	n    int
	bad  []string
}

func newStrictReceiver() *strictReceiver {
	return &strictReceiver{last: map[string]int64{}, got: map[string][]prompb.Sample{}}
}

func (r *strictReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	wr, err := readWriteRequest(req)
	if r.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ts := range wr.Timeseries {
		k := seriesName(ts.Labels)
		for _, s := range ts.Samples {
			if l, ok := r.last[k]; ok && s.Timestamp <= l {
				r.bad = append(r.bad, fmt.Sprintf("%s: %d after %d", k, s.Timestamp, l))
				http.Error(w, "out of order sample", 400)
				return
			}
		}
	}
	for _, ts := range wr.Timeseries {
		k := seriesName(ts.Labels)
		for _, s := range ts.Samples {
			r.last[k] = s.Timestamp
			r.got[k] = append(r.got[k], s)
			r.n++
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (r *strictReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func seriesName(ls []prompb.Label) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "%s=%q,", l.Name, l.Value)
	}
	return b.String()
}

// readWriteRequest reads and decodes a remote-write request's body.
func readWriteRequest(req *http.Request) (prompb.WriteRequest, error) {
	var wr prompb.WriteRequest
	body, _ := io.ReadAll(req.Body)
	raw, err := snappy.Decode(nil, body)
	if err == nil {
		err = wr.Unmarshal(raw)
	}
	return wr, err
}

// backfillRig is a store, a writer tapping it with one destination and a
// strict receiver.
type backfillRig struct {
	st    *store.Store
	rcv   *strictReceiver
	srv   *httptest.Server
	descs []*metric.Desc
	vals  []float64
	dir   string
}

func newBackfillRig(t *testing.T, series int) *backfillRig {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Job: "node", MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &backfillRig{st: st, rcv: newStrictReceiver(), dir: t.TempDir()}
	r.srv = httptest.NewServer(r.rcv)
	t.Cleanup(r.srv.Close)
	for i := range series {
		r.descs = append(r.descs, metric.NewDesc(fmt.Sprintf("m%02d", i), "", metric.Gauge))
	}
	r.vals = make([]float64, series)
	return r
}

// start runs a writer with cfg's queue against the rig until the returned
// stop is called.
func (r *backfillRig) start(t *testing.T, cfg Config) (*Writer, func()) {
	t.Helper()
	cfg.URL = r.srv.URL
	w, err := New([]Config{cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Job = "node"
	if err := w.Backfill(r.st, r.dir); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return w, stop
}

// tick stores and forwards tick i of node on every series (value i*100+series).
func (r *backfillRig) tick(t *testing.T, tap Store, node string, t0 time.Time, i int) {
	t.Helper()
	for k := range r.vals {
		r.vals[k] = float64(i*100 + k)
	}
	if err := tap.AppendTick(node, t0.Add(time.Duration(i)*time.Second), r.descs, r.vals, true); err != nil {
		t.Fatal(err)
	}
}

// check wants every tick in [0, ticks) of every node on every series
// (and up) at the receiver, each once, in order.
func (r *backfillRig) check(t *testing.T, nodes []string, t0 time.Time, ticks int) {
	t.Helper()
	want := len(nodes) * ticks * (len(r.descs) + 1)
	waitForLong(t, fmt.Sprintf("%d samples at the receiver", want), func() bool { return r.rcv.count() >= want })
	r.rcv.mu.Lock()
	defer r.rcv.mu.Unlock()
	if len(r.rcv.bad) > 0 {
		t.Fatalf("receiver refused %d requests with samples out of order; first: %s", len(r.rcv.bad), r.rcv.bad[0])
	}
	if r.rcv.n != want {
		t.Fatalf("receiver has %d samples, want %d", r.rcv.n, want)
	}
	for _, node := range nodes {
		for k, d := range append(slices.Clone(r.descs), metric.NewDesc("up", "", metric.Gauge)) {
			ls, _ := metric.SeriesLabels(nil, "node", node, d)
			slices.SortFunc(ls, func(a, b metric.Label) int { return strings.Compare(a.Name, b.Name) })
			var pl []prompb.Label
			for _, l := range ls {
				pl = append(pl, prompb.Label{Name: l.Name, Value: l.Value})
			}
			got := r.rcv.got[seriesName(pl)]
			if len(got) != ticks {
				t.Fatalf("%s %s: %d samples, want %d", node, d.Name, len(got), ticks)
			}
			for i, s := range got {
				v := float64(i*100 + k)
				if d.Name == "up" {
					v = 1
				}
				if s.Timestamp != t0.Add(time.Duration(i)*time.Second).UnixMilli() || s.Value != v {
					t.Fatalf("%s %s sample %d: %v, want t=%d v=%v", node, d.Name, i, s, t0.Add(time.Duration(i)*time.Second).UnixMilli(), v)
				}
			}
		}
	}
}

func waitForLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func backfillConfig() Config {
	return Config{QueueCapacity: 40, MaxSamplesPerSend: 10, BatchSendDeadline: Duration(5 * time.Millisecond),
		MinBackoff: Duration(time.Millisecond), MaxBackoff: Duration(20 * time.Millisecond), MaxShards: 4}
}

// TestBackfillOutage: the receiver is down while 60 ticks of 3 nodes
// (1,980 samples) meet a queue of 40. Everything arrives once the
// receiver is back, each series in order (the receiver refuses a sample
// older than its series' last, as Prometheus does), while ticks keep
// coming.
func TestBackfillOutage(t *testing.T) {
	r := newBackfillRig(t, 10)
	w, stop := r.start(t, backfillConfig())
	tap := w.Tap(r.st)
	nodes := []string{"cn01", "cn02", "cn03"}
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	r.rcv.down.Store(true)
	for i := range 60 {
		for _, n := range nodes {
			r.tick(t, tap, n, t0, i)
		}
	}
	st := w.Status().Destinations[0]
	if st.Deferred == 0 || st.BackfillSeries == 0 || st.DroppedFull != 0 {
		t.Fatalf("during the outage: %+v, want samples deferred, series behind, none dropped", st)
	}
	r.rcv.down.Store(false)
	for i := 60; i < 120; i++ { // live ticks while the backfill catches up
		for _, n := range nodes {
			r.tick(t, tap, n, t0, i)
		}
		time.Sleep(time.Millisecond)
	}
	r.check(t, nodes, t0, 120)
	waitForLong(t, "no series behind", func() bool { return w.Status().Destinations[0].BackfillSeries == 0 })
	st = w.Status().Destinations[0]
	stop()
	if st.Backfilled == 0 || st.DroppedFull+st.DroppedRejected+st.DroppedShutdown != 0 {
		t.Errorf("status %+v: want samples backfilled and none dropped", st)
	}
	if st.Backfilled != st.Deferred {
		t.Errorf("backfilled %d, deferred %d: want equal (each deferred sample read back once)", st.Backfilled, st.Deferred)
	}
	if m, _ := filepath.Glob(filepath.Join(r.dir, "pending-*")); len(m) != 0 {
		t.Errorf("pending files %v after a stop with nothing behind", m)
	}
}

// TestBackfillOff: backfill = false drops the oldest, as before.
func TestBackfillOff(t *testing.T) {
	r := newBackfillRig(t, 10)
	cfg := backfillConfig()
	off := false
	cfg.Backfill = &off
	w, _ := r.start(t, cfg)
	tap := w.Tap(r.st)
	r.rcv.down.Store(true)
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	for i := range 20 {
		r.tick(t, tap, "cn01", t0, i)
	}
	st := w.Status().Destinations[0]
	if st.Backfill || st.Deferred != 0 || st.DroppedFull == 0 {
		t.Errorf("status %+v: want no backfill, samples dropped", st)
	}
}

// TestBackfillAcrossRestart: stopped while the receiver is down, the
// writer keeps the series behind and what was queued in its file; the next
// one (same store, same directory) sends all of it, in order, before the
// series' new samples.
func TestBackfillAcrossRestart(t *testing.T) {
	r := newBackfillRig(t, 5)
	nodes := []string{"cn01", "cn02"}
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	cfg := backfillConfig()
	cfg.QueueCapacity = 1000 // some queued, some behind
	w, stop := r.start(t, cfg)
	tap := w.Tap(r.st)
	r.rcv.down.Store(true)
	for i := range 30 {
		for _, n := range nodes {
			r.tick(t, tap, n, t0, i)
		}
	}
	stop()
	if r.rcv.count() != 0 {
		t.Fatalf("%d samples through a receiver that was down", r.rcv.count())
	}
	st := w.Status().Destinations[0]
	if st.DroppedShutdown != 0 || st.QueueLength != 0 {
		t.Fatalf("after the stop: %+v, want nothing dropped or left queued", st)
	}
	files, _ := filepath.Glob(filepath.Join(r.dir, "pending-*"))
	if len(files) != 1 {
		t.Fatalf("pending files: %v", files)
	}
	b, _ := os.ReadFile(files[0])
	if n := bytes.Count(b, []byte("\n")); n != 2+len(nodes)*6 {
		t.Errorf("pending file has %d lines, want 2 + %d series:\n%s", n, len(nodes)*6, b)
	}

	r.rcv.down.Store(false)
	w2, stop2 := r.start(t, cfg)
	if m, _ := filepath.Glob(filepath.Join(r.dir, "pending-*")); len(m) != 0 {
		t.Errorf("pending file %v not removed once read", m)
	}
	tap2 := w2.Tap(r.st)
	for i := 30; i < 40; i++ {
		for _, n := range nodes {
			r.tick(t, tap2, n, t0, i)
		}
	}
	r.check(t, nodes, t0, 40)
	stop2()
}

// TestBackfillCatchUpRace: a sample stored before the backfill's read but
// pushed after the series caught up was sent by the backfill already; the
// live path must not send it again, and sends the next one.
func TestBackfillCatchUpRace(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Job: "node", MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := New([]Config{{URL: "http://127.0.0.1:1/", QueueCapacity: 100, MaxShards: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Job = "node"
	if err := w.Backfill(st, ""); err != nil {
		t.Fatal(err)
	}
	q := w.queues[0]
	d := metric.NewDesc("a", "", metric.Gauge)
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	for i := range 5 {
		if err := st.AppendTick("cn01", at(i), []*metric.Desc{d}, []float64{float64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	ls := appendTargetLabels(nil, "node", "cn01", d)
	q.mu.Lock()
	q.deferLocked([]sample{{labels: ls, t: at(0).UnixMilli()}})
	q.mu.Unlock()
	var b backfiller
	if _, err := q.backfillRound(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if q.status().BackfillSeries != 0 {
		t.Fatal("not caught up after reading everything stored")
	}
	// Sample 4 was stored before the read; its push comes only now.
	w.add("cn01", at(4).UnixMilli(), []*metric.Desc{d}, []float64{4})
	w.add("cn01", at(5).UnixMilli(), []*metric.Desc{d}, []float64{5})
	var got []int64
	for _, s := range q.drain() {
		got = append(got, (s.t-at(0).UnixMilli())/1000)
	}
	if !slices.Equal(got, []int64{0, 1, 2, 3, 4, 5}) {
		t.Errorf("queued seconds %v, want 0..5 once each", got)
	}
	q.mu.Lock()
	n := len(q.lagging)
	q.mu.Unlock()
	if n != 0 {
		t.Errorf("%d entries left once the series pushed again", n)
	}
}

func TestDecodeLabelSet(t *testing.T) {
	d := metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", "3", "mode", "user")
	b := appendTargetLabels(nil, "node", "cn01", d)
	ls, err := decodeLabelSet(b)
	if err != nil {
		t.Fatal(err)
	}
	want := labels.FromStrings("__name__", "node_cpu_seconds_total", "cpu", "3", "mode", "user", "instance", "cn01", "job", "node", "node", "cn01")
	if !labels.Equal(ls, want) {
		t.Errorf("decoded %v, want %v", ls, want)
	}
	if !bytes.Equal(appendLabelSet(nil, ls), b) {
		t.Error("re-encoding differs")
	}
	for name, want := range map[string]string{"instance": "cn01", "job": "node", "mode": "user", "cpu": "3", "nope": "", "": ""} {
		if got := labelValue(b, name); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", name, got, want)
		}
	}
	if got := labelValue(b[:len(b)-3], "node"); got != "" {
		t.Errorf("labelValue of a cut label set = %q", got)
	}
	for _, bad := range [][]byte{{0x0a}, {0x0a, 0x05, 0x0a, 0x01}, {0x12, 0x00}, b[:len(b)-1]} {
		if _, err := decodeLabelSet(bad); err == nil {
			t.Errorf("decodeLabelSet(%x): no error", bad)
		}
	}
}

func TestParsePending(t *testing.T) {
	d := metric.NewDesc("a", "", metric.Gauge)
	enc := base64Labels(appendTargetLabels(nil, "node", "cn01", d))
	good := pendingMagic + "\nurl http://x/\n1700000000000 " + enc + "\n"
	es, err := parsePending(strings.NewReader(good), "f")
	if err != nil || len(es) != 1 || es[0].from != 1700000000000 {
		t.Fatalf("parsePending = %+v, %v", es, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "f: empty"},
		{"vigil-remote-write-pending 2\n", `f:1: want "vigil-remote-write-pending 1"`},
		{pendingMagic + "\nhost x\n", `f:2: want "url URL"`},
		{pendingMagic + "\nurl x\nabc " + enc + "\n", `f:3: want "FROM_MS LABELS"`},
		{pendingMagic + "\nurl x\n12\n", `f:3: want "FROM_MS LABELS"`},
		{pendingMagic + "\nurl x\n12 !!\n", "f:3: labels: illegal base64"},
		{pendingMagic + "\nurl x\n12 AAAA\n", "f:3: label set: tag 0x0"},
		{pendingMagic + "\nurl x\n12 \n", "f:3: label set: empty"},
		{pendingMagic + "\nurl x\n" + strings.Repeat("1", maxPendingLine+1) + "\n", "f:3: bufio.Scanner: token too long"},
	} {
		_, err := parsePending(strings.NewReader(tc.in), "f")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("parsePending(%.40q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func base64Labels(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func FuzzParsePending(f *testing.F) {
	d := metric.NewDesc("a", "", metric.Gauge)
	f.Add([]byte(pendingMagic + "\nurl x\n5 " + base64Labels(appendTargetLabels(nil, "node", "cn01", d)) + "\n"))
	f.Add([]byte(pendingMagic + "\nurl x\n-1 CgA=\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := parsePending(bytes.NewReader(b), "f")
		if err != nil {
			return
		}
		for _, e := range es {
			if _, err := decodeLabelSet(e.labels); err != nil {
				t.Fatalf("accepted a label set that does not decode: %v", err)
			}
		}
	})
}

// BenchmarkBackfill reads 60 s of 1,000 series (10 nodes × 100) behind
// back from a store, draining the queue between rounds: the backfill's
// cost per sample, store reads included.
func BenchmarkBackfill(b *testing.B) {
	st, err := store.Open(store.Options{Dir: b.TempDir(), Job: "node", MinFreeBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	const nodes, series, ticks = 10, 100, 60
	descs := make([]*metric.Desc, series)
	vals := make([]float64, series)
	for i := range descs {
		descs[i] = metric.NewDesc(fmt.Sprintf("m%03d", i), "", metric.Gauge)
	}
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	for i := range ticks {
		for n := range nodes {
			for k := range vals {
				vals[k] = float64(i*1000 + k)
			}
			if err := st.AppendTick(fmt.Sprintf("cn%02d", n), t0.Add(time.Duration(i)*time.Second), descs, vals, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	w, err := New([]Config{{URL: "http://127.0.0.1:1/", QueueCapacity: 100_000, MaxSamplesPerSend: 2000}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	w.Job = "node"
	if err := w.Backfill(st, ""); err != nil {
		b.Fatal(err)
	}
	q := w.queues[0]
	var keys [][]byte
	for n := range nodes {
		for _, d := range descs {
			keys = append(keys, appendTargetLabels(nil, "node", fmt.Sprintf("cn%02d", n), d))
		}
	}
	ctx := context.Background()
	var bf backfiller
	b.ReportAllocs()
	b.ResetTimer()
	read := 0
	for range b.N {
		q.mu.Lock()
		clear(q.lagging)
		for _, k := range keys {
			q.deferLocked([]sample{{labels: k, t: t0.UnixMilli()}})
		}
		q.mu.Unlock()
		for {
			progress, err := q.backfillRound(ctx, &bf)
			if err != nil {
				b.Fatal(err)
			}
			read += len(q.drain())
			if !progress {
				break
			}
		}
		if q.behind != 0 {
			b.Fatalf("%d series still behind", q.behind)
		}
	}
	if read != b.N*nodes*series*ticks {
		b.Fatalf("read %d samples, want %d", read, b.N*nodes*series*ticks)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(read), "ns/sample")
}
