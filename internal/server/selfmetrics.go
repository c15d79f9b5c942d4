package server

import (
	"context"
	"fmt"
	"math"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/vigil-hpc/vigil/internal/httpsec"
	"github.com/vigil-hpc/vigil/internal/ingest"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/store"
)

// registerMetrics adds the data directory's disk space to s.reg.
func (s *Server) registerMetrics() {
	statfs := func(f func(st *syscall.Statfs_t) float64) func() float64 {
		return func() float64 {
			var st syscall.Statfs_t
			if err := syscall.Statfs(s.cfg.Data, &st); err != nil {
				return math.NaN()
			}
			return f(&st)
		}
	}
	s.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vigil_data_dir_free_bytes", Help: "Bytes available to the server on the file system of its data directory.",
		}, statfs(func(st *syscall.Statfs_t) float64 { return float64(st.Bavail) * float64(st.Bsize) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vigil_data_dir_size_bytes", Help: "Size of the file system of the data directory.",
		}, statfs(func(st *syscall.Statfs_t) float64 { return float64(st.Blocks) * float64(st.Bsize) })),
	)
}

// registerIngest exposes what the tree's stream stored.
func (s *Server) registerIngest(h *ingest.Handler) {
	st := h.Stats()
	counter := func(name, help string, f func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	nodes := func(up bool) func() float64 {
		return func() float64 {
			u, d := h.Liveness().Counts()
			if up {
				return float64(u)
			}
			return float64(d)
		}
	}
	s.reg.MustRegister(
		counter("vigil_ingest_ticks_total", "Node ticks received from the tree.", st.Ticks.Load),
		counter("vigil_ingest_samples_appended_total", "Values of the tree's ticks appended to the store.", st.Values.Load),
		counter("vigil_ingest_errors_total", "Appends that failed or had samples rejected by the store.", st.Errors.Load),
		counter("vigil_ingest_gaps_total", "Gap records (lost ticks) received from the tree.", st.Gaps.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_ingest_nodes", Help: "Nodes by state.", ConstLabels: prometheus.Labels{"state": "up"}}, nodes(true)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_ingest_nodes", Help: "Nodes by state.", ConstLabels: prometheus.Labels{"state": "down"}}, nodes(false)),
	)
}

// logHTTPSecurity says once which HTTP access policy applies.
func (s *Server) logHTTPSecurity(addr string) {
	switch {
	case s.cfg.WebConfig != "":
		s.log.Info("HTTP access as the web config says (TLS, basic auth, client certificates)", "http", addr, "web_config", s.cfg.WebConfig)
	case httpsec.IsLoopback(addr):
		s.log.Info("HTTP API on loopback only; use --http and --web-config to serve other hosts", "http", addr)
	default:
		s.log.Warn("HTTP API open to every peer without authentication; use --web-config FILE", "http", addr)
	}
	if s.cfg.EnableRemoteWriteReceiver {
		s.log.Info("remote-write receiver on: POST /api/v1/write stores what it is sent")
	}
}

// selfScrape stores the server's own metrics every interval, as Prometheus
// scrapes itself, so the API and dashboard can query vigil_* of the server.
func (s *Server) selfScrape(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var failed logging.OnChange // each kind of failure once, not once per interval
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			failed.Warn(s.log, "storing the server's own metrics", s.scrapeSelf(now))
		}
	}
}

// scrapeSelf gathers s.reg and appends it at now under job="vigil".
func (s *Server) scrapeSelf(now time.Time) error {
	mfs, gerr := s.reg.Gather() // partial results are still worth storing
	// Through remote write's tee: the destinations get them too.
	app := s.rwOut.Appendable(s.store).Appender(context.Background())
	ts := now.UnixMilli()
	var b labels.ScratchBuilder
	var aerr error
	add := func(name string, m *dto.Metric, extraName, extraValue string, v float64) {
		b.Reset()
		b.Add(labels.MetricName, name)
		b.Add("job", SelfJob)
		b.Add("instance", SelfNode)
		b.Add(store.NodeLabel, SelfNode)
		for _, lp := range m.GetLabel() {
			n := lp.GetName()
			// The target labels are ours; a metric's own label of that
			// name (vigil_node_clock_offset_seconds{node}) is kept as
			// exported_<name>, as Prometheus does without honor_labels.
			if n == "job" || n == "instance" || n == store.NodeLabel {
				n = "exported_" + n
			}
			b.Add(n, lp.GetValue())
		}
		if extraName != "" {
			b.Add(extraName, extraValue)
		}
		b.Sort()
		if _, err := app.Append(0, b.Labels(), ts, v); err != nil && aerr == nil {
			aerr = fmt.Errorf("append %s: %w", name, err)
		}
	}
	for _, mf := range mfs {
		name := mf.GetName()
		typ := strings.ToLower(mf.GetType().String())
		s.store.SetMetadata(name, store.Metadata{Type: typ, Help: mf.GetHelp()})
		for _, m := range mf.GetMetric() {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m, "", "", m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m, "", "", m.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, m, "", "", m.GetUntyped().GetValue())
			case dto.MetricType_SUMMARY:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					add(name, m, "quantile", fmt.Sprint(q.GetQuantile()), q.GetValue())
				}
				add(name+"_sum", m, "", "", sm.GetSampleSum())
				add(name+"_count", m, "", "", float64(sm.GetSampleCount()))
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, bk := range h.GetBucket() {
					add(name+"_bucket", m, "le", fmt.Sprint(bk.GetUpperBound()), float64(bk.GetCumulativeCount()))
				}
				add(name+"_bucket", m, "le", "+Inf", float64(h.GetSampleCount()))
				add(name+"_sum", m, "", "", h.GetSampleSum())
				add(name+"_count", m, "", "", float64(h.GetSampleCount()))
			}
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if aerr != nil {
		return aerr
	}
	return gerr
}
