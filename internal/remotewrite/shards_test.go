package remotewrite

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// slowReceiver takes delay to answer each request, as a loaded TSDB does,
// and records every series' timestamps in the order they arrive. It also
// notes a series that arrives in two requests at once: then nothing keeps
// its samples in order.
type slowReceiver struct {
	delay time.Duration

	mu       sync.Mutex
	ts       map[string][]int64
	inFlight map[string]bool
	overlaps int
	requests int
	maxConc  int
	conc     int
}

func newSlowReceiver(delay time.Duration) *slowReceiver {
	return &slowReceiver{delay: delay, ts: map[string][]int64{}, inFlight: map[string]bool{}}
}

func (r *slowReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	wr, err := readWriteRequest(req)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	names := map[string]bool{}
	for _, ts := range wr.Timeseries {
		names[labelsOf(ts)] = true
	}
	r.mu.Lock()
	r.requests++
	r.conc++
	r.maxConc = max(r.maxConc, r.conc)
	for n := range names {
		if r.inFlight[n] {
			r.overlaps++
		}
		r.inFlight[n] = true
	}
	r.mu.Unlock()
	time.Sleep(r.delay)
	r.mu.Lock()
	for _, ts := range wr.Timeseries {
		n := labelsOf(ts)
		for _, s := range ts.Samples {
			r.ts[n] = append(r.ts[n], s.Timestamp)
		}
	}
	for n := range names {
		delete(r.inFlight, n)
	}
	r.conc--
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// check reports series whose timestamps did not arrive in increasing
// order, and, if want > 0, series that miss some of want timestamps.
func (r *slowReceiver) check(t *testing.T, series, want int) (received int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.overlaps > 0 {
		t.Errorf("%d times a series was in two requests in flight at once", r.overlaps)
	}
	if want > 0 && len(r.ts) != series {
		t.Errorf("received %d series, want %d", len(r.ts), series)
	}
	bad := 0
	for n, ts := range r.ts {
		received += len(ts)
		for i := 1; i < len(ts); i++ {
			if ts[i] <= ts[i-1] {
				if bad++; bad <= 3 {
					t.Errorf("series %s: timestamp %d after %d (sample %d)", n, ts[i], ts[i-1], i)
				}
				break
			}
		}
		if want > 0 && len(ts) != want {
			if bad++; bad <= 3 {
				t.Errorf("series %s: %d samples, want %d", n, len(ts), want)
			}
		}
	}
	return received
}

// loadGen sends ticks of nodes × descs values every interval with
// timestamps that follow the clock, as the tree delivers them.
type loadGen struct {
	nodes, descs, ticks int
	interval            time.Duration
}

func (g loadGen) series() int { return g.nodes * g.descs }

func (g loadGen) run(w *Writer) {
	descs := make([]*metric.Desc, g.descs)
	for i := range descs {
		descs[i] = metric.NewDesc(fmt.Sprintf("m%d", i), "", metric.Gauge)
	}
	vals := make([]float64, g.descs)
	start := time.Now().Truncate(time.Millisecond)
	for k := range g.ticks {
		at := start.Add(time.Duration(k) * g.interval)
		time.Sleep(time.Until(at))
		for n := range g.nodes {
			w.addTick(fmt.Sprintf("cn%03d", n), at.UnixMilli(), descs, vals, false)
		}
	}
}

// settled waits until every enqueued sample was sent or dropped.
func settled(t *testing.T, w *Writer) DestinationStatus {
	t.Helper()
	var s DestinationStatus
	waitFor(t, "the queue to drain", func() bool {
		s = w.Status().Destinations[0]
		return s.QueueLength == 0 && s.Sent+s.DroppedFull+s.DroppedRejected+s.DroppedShutdown == s.Enqueued
	})
	return s
}

func slowConfig(url string, lo, hi int) Config {
	return Config{
		URL: url, MaxSamplesPerSend: 100, BatchSendDeadline: Duration(20 * time.Millisecond), QueueCapacity: 4000,
		MinShards: lo, MaxShards: hi, MinBackoff: Duration(time.Millisecond), MaxBackoff: Duration(10 * time.Millisecond),
	}
}

// TestShardsKeepUp: a receiver taking 20 ms a request answers one shard
// 5,000 samples/s of 100; 15,000 samples/s come in. One shard falls behind
// and its full queue drops; eight deliver everything, each series in order.
func TestShardsKeepUp(t *testing.T) {
	g := loadGen{nodes: 50, descs: 3, ticks: 100, interval: 10 * time.Millisecond}
	for _, tc := range []struct {
		shards  int
		keepsUp bool
	}{{1, false}, {8, true}} {
		t.Run(fmt.Sprintf("shards=%d", tc.shards), func(t *testing.T) {
			rcv := newSlowReceiver(20 * time.Millisecond)
			srv := httptest.NewServer(rcv)
			defer srv.Close()
			w := runWriter(t, slowConfig(srv.URL, tc.shards, tc.shards))
			g.run(w)
			s := settled(t, w)
			got := rcv.check(t, g.series(), map[bool]int{true: g.ticks}[tc.keepsUp])
			total := uint64(g.series() * g.ticks)
			if s.Enqueued != total || uint64(got) != s.Sent {
				t.Errorf("enqueued %d (want %d), sent %d, receiver got %d", s.Enqueued, total, s.Sent, got)
			}
			if tc.keepsUp && (s.DroppedFull != 0 || s.Sent != total) {
				t.Errorf("%d shards: sent %d, dropped %d of %d; want all sent", tc.shards, s.Sent, s.DroppedFull, total)
			}
			if !tc.keepsUp && s.DroppedFull == 0 {
				t.Errorf("1 shard kept up (%+v): the receiver is not slow enough for the test", s)
			}
			if s.Shards != tc.shards || s.Reshards != 0 {
				t.Errorf("status: %d shards, %d reshards; want %d fixed", s.Shards, s.Reshards, tc.shards)
			}
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			if rcv.maxConc > tc.shards {
				t.Errorf("%d requests in flight at once, more than %d shards", rcv.maxConc, tc.shards)
			}
			t.Logf("%d shards: sent %d, dropped %d, %d requests, at most %d at once", tc.shards, s.Sent, s.DroppedFull, rcv.requests, rcv.maxConc)
		})
	}
}

// TestReshardKeepsOrder changes the shard count every few milliseconds
// while samples flow: partitions change hands with requests in flight,
// and still no sample is lost or overtakes an older one of its series.
func TestReshardKeepsOrder(t *testing.T) {
	rcv := newSlowReceiver(3 * time.Millisecond)
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := slowConfig(srv.URL, 1, 8)
	cfg.QueueCapacity = 100_000
	cfg.MaxSamplesPerSend = 37
	w, err := New([]Config{cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := w.queues[0]
	q.reshardEvery = time.Hour // only the test reshards
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	stop := make(chan struct{})
	var flips atomic.Int64
	go func() {
		counts := []int{8, 1, 3, 5, 2, 8, 4, 1, 7}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(7 * time.Millisecond):
			}
			q.setShards(counts[i%len(counts)])
			flips.Add(1)
		}
	}()
	g := loadGen{nodes: 20, descs: 5, ticks: 150, interval: 5 * time.Millisecond}
	g.run(w)
	close(stop)
	s := settled(t, w)
	rcv.check(t, g.series(), g.ticks)
	if total := uint64(g.series() * g.ticks); s.Sent != total || s.DroppedFull != 0 {
		t.Errorf("sent %d, dropped %d; want %d sent", s.Sent, s.DroppedFull, total)
	}
	if flips.Load() < 20 {
		t.Errorf("only %d reshards during the load", flips.Load())
	}
}

// TestAdaptiveShards: with the shard count free between 1 and 8, a slow
// receiver makes it grow until the queue keeps up, nothing lost and each
// series in order, and it falls back to 1 when the load ends.
func TestAdaptiveShards(t *testing.T) {
	rcv := newSlowReceiver(20 * time.Millisecond)
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := slowConfig(srv.URL, 1, 8)
	cfg.QueueCapacity = 100_000 // room for the backlog before the growth
	w, err := New([]Config{cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := w.queues[0]
	q.reshardEvery = 100 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	var most atomic.Int32
	stopWatch := watchShards(q, func(n int32) { most.Store(max(most.Load(), n)) })
	g := loadGen{nodes: 50, descs: 3, ticks: 150, interval: 10 * time.Millisecond} // 15,000 samples/s for 1.5 s
	g.run(w)
	s := settled(t, w)
	stopWatch()
	rcv.check(t, g.series(), g.ticks)
	if total := uint64(g.series() * g.ticks); s.Sent != total || s.DroppedFull != 0 {
		t.Errorf("sent %d, dropped %d; want %d sent", s.Sent, s.DroppedFull, total)
	}
	if most.Load() < 3 {
		t.Errorf("at most %d shards; 15,000 samples/s at 5,000 a shard need 3", most.Load())
	}
	waitFor(t, "the shards to fall back to 1", func() bool { return q.shards.Load() == 1 })
	if s := w.Status().Destinations[0]; s.Reshards < 2 {
		t.Errorf("%d reshards, want a growth and a shrink at least", s.Reshards)
	}
	t.Logf("grew to %d shards; %d requests", most.Load(), rcv.requests)
}

func TestDesiredShards(t *testing.T) {
	const deadline = time.Second
	for _, tc := range []struct {
		name string
		w    window
		n    int
		want int
	}{
		{"behind and busy: enough for the rate in and the backlog", window{seconds: 10, in: 30_000, sent: 10_000, busy: 2, backlog: 100_000, age: 5 * time.Second}, 2, 8},
		{"behind and busy, capped", window{seconds: 10, in: 300_000, sent: 10_000, busy: 2, age: 5 * time.Second}, 2, 8},
		{"behind and busy, a little", window{seconds: 10, in: 10_500, sent: 10_000, busy: 2, age: 2 * time.Second}, 2, 3},
		{"at max already", window{seconds: 10, in: 300_000, sent: 10_000, busy: 8, age: 5 * time.Second}, 8, 8},
		{"behind but the receiver fails", window{seconds: 10, in: 30_000, sent: 10_000, busy: 2, failed: true, age: 5 * time.Second}, 2, 2},
		{"behind but idle shards: not the sending", window{seconds: 10, in: 30_000, sent: 10_000, busy: 0.5, age: 5 * time.Second}, 2, 2},
		{"up to date and busy: keep", window{seconds: 10, in: 10_000, sent: 10_000, busy: 1.9, age: 500 * time.Millisecond}, 2, 2},
		{"up to date, half idle: shrink", window{seconds: 10, in: 10_000, sent: 10_000, busy: 1.5, age: 500 * time.Millisecond}, 4, 3},
		{"idle: min", window{seconds: 10}, 6, 1},
		{"no interval", window{}, 4, 4},
	} {
		if got := desiredShards(tc.w, tc.n, 1, 8, deadline); got != tc.want {
			t.Errorf("%s: desiredShards(%+v, %d) = %d, want %d", tc.name, tc.w, tc.n, got, tc.want)
		}
	}
}

func TestShardConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{URL: "http://h/", MinShards: -1}, "must be 0..64"},
		{Config{URL: "http://h/", MaxShards: 65}, "must be 0..64"},
		{Config{URL: "http://h/", MinShards: 4, MaxShards: 2}, "min_shards 4 exceeds max_shards 2"},
		{Config{URL: "http://h/", MinShards: 4}, ""},
	} {
		err := tc.cfg.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	for _, tc := range []struct {
		cfg    Config
		lo, hi int
		parts  []int
	}{
		{Config{QueueCapacity: 10}, 1, 8, []int{2, 2, 1, 1, 1, 1, 1, 1}},
		{Config{QueueCapacity: 3, MinShards: 5}, 3, 3, []int{1, 1, 1}},
		{Config{QueueCapacity: 100, MinShards: 12}, 12, 12, nil},
	} {
		q := newQueue(tc.cfg, w0().log)
		c := q.cfg
		if c.MinShards != tc.lo || c.MaxShards != tc.hi || int(q.shards.Load()) != tc.lo {
			t.Errorf("%+v: shards %d..%d, start %d; want %d..%d", tc.cfg, c.MinShards, c.MaxShards, q.shards.Load(), tc.lo, tc.hi)
		}
		total := 0
		for i := range q.parts {
			p := &q.parts[i]
			total += len(p.ring)
			if tc.parts != nil && len(p.ring) != tc.parts[i] {
				t.Errorf("%+v: partition %d holds %d, want %d", tc.cfg, i, len(p.ring), tc.parts[i])
			}
		}
		if total != tc.cfg.QueueCapacity {
			t.Errorf("%+v: partitions hold %d in all, want queue_capacity", tc.cfg, total)
		}
	}
}

func w0() *Writer {
	w, _ := New(nil, nil)
	return w
}

// TestMetrics: /metrics carries the shard count and the drops by reason,
// one set per destination even when two share a host.
func TestMetrics(t *testing.T) {
	w, err := New([]Config{{URL: "http://h/a", MinShards: 3}, {URL: "http://h/b", QueueCapacity: 1, MaxShards: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := metric.NewDesc("a", "", metric.Gauge)
	w.add("cn01", 1, []*metric.Desc{d}, []float64{1})
	w.add("cn01", 2, []*metric.Desc{d}, []float64{2})
	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			k := mf.GetName()
			for _, l := range m.GetLabel() {
				k += "," + l.GetName() + "=" + l.GetValue()
			}
			got[k] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for k, want := range map[string]float64{
		"vigil_remote_write_shards,destination=h":                                    3,
		"vigil_remote_write_shards,destination=h#2":                                  1,
		"vigil_remote_write_queue_samples,destination=h":                             2,
		"vigil_remote_write_samples_dropped_total,destination=h#2,reason=queue_full": 1,
		"vigil_remote_write_samples_dropped_total,destination=h,reason=queue_full":   0,
		"vigil_remote_write_queue_capacity_samples,destination=h#2":                  1,
		"vigil_remote_write_samples_enqueued_total,destination=h#2":                  2,
		"vigil_remote_write_samples_dropped_total,destination=h#2,reason=rejected":   0,
		"vigil_remote_write_requests_failed_total,destination=h":                     0,
		"vigil_remote_write_reshards_total,destination=h":                            0,
		"vigil_remote_write_send_seconds_total,destination=h":                        0,
		"vigil_remote_write_samples_sent_total,destination=h":                        0,
		"vigil_remote_write_requests_total,destination=h#2":                          0,
		"vigil_remote_write_samples_dropped_total,destination=h#2,reason=shutdown":   0,
		"vigil_remote_write_queue_capacity_samples,destination=h":                    DefaultQueueCapacity,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
}

// BenchmarkShards sends through a receiver that takes 20 ms a request
// (a busy TSDB far away) with a fixed shard count. One op is one sample;
// the producer waits while the queue is half full, so nothing is
// dropped and samples/s is what the shards deliver.
func BenchmarkShards(b *testing.B) {
	const nodes, perNode = 100, 10
	descs := make([]*metric.Desc, perNode)
	for i := range descs {
		descs[i] = metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", fmt.Sprint(i))
	}
	names := make([]string, nodes)
	for n := range names {
		names[n] = fmt.Sprintf("cn%05d", n)
	}
	values := make([]float64, perNode)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, shards := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			w, err := New([]Config{{URL: srv.URL, MinShards: shards, MaxShards: shards, BatchSendDeadline: Duration(50 * time.Millisecond)}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = w.Run(ctx); close(done) }()
			q := w.queues[0]
			b.ReportAllocs()
			b.ResetTimer()
			t := int64(0)
			for pushed := 0; pushed < b.N; pushed += nodes * perNode {
				for q.fill() > 0.5 {
					time.Sleep(100 * time.Microsecond)
				}
				t++
				for n := range nodes {
					w.addTick(names[n], t, descs, values, false)
				}
			}
			for s := &q.stats; s.sent.Load()+s.droppedFull.Load() < s.enqueued.Load(); {
				time.Sleep(100 * time.Microsecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(q.stats.sent.Load())/b.Elapsed().Seconds(), "samples/s")
			if d := q.stats.droppedFull.Load(); d > 0 {
				b.Errorf("%d samples dropped", d)
			}
			cancel()
			<-done
		})
	}
}

// fill returns the queue's fill, 0..1.
func (q *queue) fill() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return float64(q.queued) / float64(q.cfg.QueueCapacity)
}

// With the default reshard interval (10 s), a queue falling behind grows
// within a couple of growCheck windows instead of waiting the interval,
// and does not shrink again before the interval.
func TestShardsGrowWithinSeconds(t *testing.T) {
	rcv := newSlowReceiver(20 * time.Millisecond)
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	cfg := slowConfig(srv.URL, 1, 8)
	cfg.QueueCapacity = 200_000
	w, err := New([]Config{cfg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := w.queues[0]
	if q.reshardEvery != DefaultReshardInterval {
		t.Fatalf("reshard interval %s, want the default", q.reshardEvery)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	var grewAt atomic.Int64
	stopWatch := watchShards(q, func(n int32) {
		if n > 1 && grewAt.Load() == 0 {
			grewAt.Store(int64(time.Since(start)))
		}
	})
	g := loadGen{nodes: 50, descs: 3, ticks: 400, interval: 10 * time.Millisecond} // 15,000 samples/s for 4 s
	g.run(w)
	s := settled(t, w)
	stopWatch()
	rcv.check(t, g.series(), g.ticks)
	if total := uint64(g.series() * g.ticks); s.Sent != total || s.DroppedFull != 0 {
		t.Errorf("sent %d, dropped %d; want %d sent", s.Sent, s.DroppedFull, total)
	}
	if at := time.Duration(grewAt.Load()); at == 0 || at > 3500*time.Millisecond {
		t.Fatalf("grew after %s; want within 3.5 s of the load starting (growCheck %s, interval %s)", at, growCheck, q.reshardEvery)
	}
	t.Logf("grew after %s to %d shards", time.Duration(grewAt.Load()), q.shards.Load())
}

// watchShards calls fn with q's shard count every 5 ms until stop.
func watchShards(q *queue, fn func(n int32)) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			fn(q.shards.Load())
		}
	}()
	return func() { close(done); <-exited }
}

// All series hashed to one partition: the partitions share
// queue_capacity, so nothing drops until the whole queue is full, and then
// exactly the overflow drops, oldest first.
func TestUnevenPartitionsShareCapacity(t *testing.T) {
	cfg := Config{URL: "http://127.0.0.1:1/", QueueCapacity: 1000, MinShards: 4, MaxShards: 4}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	q := newQueue(cfg, slog.New(slog.DiscardHandler))
	push := func(from, n int) {
		ss := make([]sample, n)
		hs := make([]uint64, n)
		for i := range ss {
			ss[i].t = int64(from + i)
			hs[i] = 4 * 7 // always partition 0
		}
		q.push(ss, hs)
	}
	push(0, 900)
	if d := q.stats.droppedFull.Load(); d != 0 || q.len() != 900 {
		t.Fatalf("900 samples into one partition of a 1,000-sample queue: %d dropped, %d queued; want none dropped", d, q.len())
	}
	push(900, 300)
	if d := q.stats.droppedFull.Load(); d != 200 || q.len() != 1000 {
		t.Fatalf("then 300 more: %d dropped, %d queued; want 200 dropped, 1,000 queued", d, q.len())
	}
	if ts, ok := q.oldest(); !ok || ts != 200 {
		t.Fatalf("oldest queued %d (%v), want 200: the oldest are the ones dropped", ts, ok)
	}
	// A sample for an empty partition makes room in the fullest.
	q.push([]sample{{t: 5000}}, []uint64{1})
	if d := q.stats.droppedFull.Load(); d != 201 || q.len() != 1000 || q.parts[1].n != 1 {
		t.Fatalf("one into an empty partition: %d dropped, %d queued, partition 1 holds %d", d, q.len(), q.parts[1].n)
	}
}

// The rings' slots stay within twice queue_capacity whatever the hashing:
// partitions grown by bursts that never drain keep their slots, and a
// later burst into another partition finds no budget left and drops its
// own oldest instead of growing.
func TestPartitionSlotsBounded(t *testing.T) {
	cfg := Config{URL: "http://127.0.0.1:1/", QueueCapacity: 1000, MinShards: 4, MaxShards: 4}
	q := newQueue(cfg, slog.New(slog.DiscardHandler))
	burst := func(part uint64, n int) {
		ss := make([]sample, n)
		hs := make([]uint64, n)
		for i := range hs {
			hs[i] = part
		}
		q.push(ss, hs)
	}
	for round := range 20 {
		burst(uint64(round%4), 900) // each partition in turn takes a burst
		if q.slots > 2*cfg.QueueCapacity || q.len() > cfg.QueueCapacity {
			t.Fatalf("round %d: %d slots, %d queued; want at most %d and %d", round, q.slots, q.len(), 2*cfg.QueueCapacity, cfg.QueueCapacity)
		}
		sum := 0
		for i := range q.parts {
			sum += len(q.parts[i].ring)
		}
		if sum != q.slots {
			t.Fatalf("round %d: rings hold %d slots, counted %d", round, sum, q.slots)
		}
	}
	if q.stats.droppedFull.Load()+uint64(q.len()) != 20*900 {
		t.Fatalf("%d dropped + %d queued != %d pushed", q.stats.droppedFull.Load(), q.len(), 20*900)
	}
}
