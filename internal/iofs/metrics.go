package iofs

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/httpsec/lean"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// Self series, served at /metrics when --metrics is set: what iofs could
// not deliver or had to fold must be visible without reading its log.
const (
	mIntervals = iota
	mDropQueue
	mDropNoSampler
	mDropSend
	mConnects
	mSendErrors
	mFolded
	nMetrics
)

func metricDescs() [nMetrics]*metric.Desc {
	const hd = "Intervals not delivered to the sampler: queue full (the sender is slow), no sampler listening, or a failed send."
	return [nMetrics]*metric.Desc{
		metric.NewDesc("vigil_iofs_intervals_total", "Intervals delivered to the sampler's appio socket.", metric.Counter),
		metric.NewDesc("vigil_iofs_dropped_intervals_total", hd, metric.Counter, "reason", "queue_full"),
		metric.NewDesc("vigil_iofs_dropped_intervals_total", hd, metric.Counter, "reason", "no_sampler"),
		metric.NewDesc("vigil_iofs_dropped_intervals_total", hd, metric.Counter, "reason", "send_failed"),
		metric.NewDesc("vigil_iofs_connects_total", "Connections made to the sampler's appio socket.", metric.Counter),
		metric.NewDesc("vigil_iofs_send_errors_total", "Connections to the sampler lost on a write.", metric.Counter),
		metric.NewDesc("vigil_iofs_folded_operations_total", "Operations counted under \"other files\" because --max-files or --max-pairs was reached.", metric.Counter),
	}
}

// metricsServer serves the self series on its own listener.
type metricsServer struct {
	t     *FS
	ln    net.Listener
	descs [nMetrics]*metric.Desc
	mu    sync.Mutex // the writer's buffers
	tw    metric.TextWriter
	b     metric.Batch
}

// listenMetrics binds --metrics before the mount, so a bad address fails
// early.
func listenMetrics(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	return ln, nil
}

func (m *metricsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	st := &m.t.stats
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b.Reset(time.Now())
	m.b.Add(m.descs[mIntervals], float64(st.Intervals.Load()))
	m.b.Add(m.descs[mDropQueue], float64(st.DroppedQueue.Load()))
	m.b.Add(m.descs[mDropNoSampler], float64(st.DroppedNoSampler.Load()))
	m.b.Add(m.descs[mDropSend], float64(st.DroppedSend.Load()))
	m.b.Add(m.descs[mConnects], float64(st.Connects.Load()))
	m.b.Add(m.descs[mSendErrors], float64(st.SendErrors.Load()))
	m.b.Add(m.descs[mFolded], float64(m.t.folded.Load()))
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_ = m.tw.Write(w, &m.b)
}

// serve runs until ctx ends; a handful of connections is plenty for a scrape.
func (m *metricsServer) serve(ctx context.Context) error {
	return lean.Serve(ctx, m.ln, m, lean.Options{MaxConnections: 8, Logger: m.t.log.With("component", "http")})
}

// MetricsAddr is the address /metrics is served on, "" without --metrics.
func (t *FS) MetricsAddr() string {
	if t.metrics == nil {
		return ""
	}
	return t.metrics.ln.Addr().String()
}
