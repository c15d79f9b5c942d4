package httpsec

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics count a listener's connections and requests.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	conns    prometheus.Gauge
	refused  *prometheus.CounterVec
}

// NewMetrics registers the HTTP metrics on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_http_requests_total",
			Help: "HTTP requests answered, by handler (route) and status code.",
		}, []string{"handler", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vigil_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by handler (route).",
			Buckets: []float64{.001, .005, .025, .1, .5, 2.5, 10, 60},
		}, []string{"handler"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_http_connections",
			Help: "Open HTTP connections (capped per listener).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_http_refused_total",
			Help: "HTTP requests refused before reaching a handler: 401 (missing or wrong credentials) or 429 (the web configuration's rate limit).",
		}, []string{"code"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.conns, m.refused)
	}
	return m
}

// ConnState is an http.Server.ConnState hook counting open connections.
func (m *Metrics) ConnState(_ net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		m.conns.Inc()
	case http.StateHijacked, http.StateClosed:
		m.conns.Dec()
	}
}

// Outer wraps a listener's whole handler, authentication included, and
// counts the requests refused by authentication or rate limit (set it as
// Options.Outer). The handlers behind it never answer 401 or 429.
func (m *Metrics) Outer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(cw, r)
		if cw.code == http.StatusUnauthorized || cw.code == http.StatusTooManyRequests {
			m.refused.WithLabelValues(strconv.Itoa(cw.code)).Inc()
		}
	})
}

// Instrument counts the requests mux answers by its matched route, so the
// handler label has as many values as the mux has patterns.
func (m *Metrics) Instrument(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(cw, r)
		// ServeMux stores the matched pattern ("GET /api/v1/query") in r.
		route := r.Pattern
		if _, path, ok := strings.Cut(route, " "); ok {
			route = path
		}
		if route == "" {
			route = "none"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(cw.code)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

type codeWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *codeWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
