package fabric

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/logging"
)

// Paths served by Register.
const (
	Path    = "/api/v1/fabric"
	PathTop = "/api/v1/fabric/top"
)

// Options configure a Service.
type Options struct {
	Query Querier
	// Jobs is the job index (nil: no job attribution).
	Jobs       *jobs.Index
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Service answers the fabric API.
type Service struct {
	o        Options
	log      *slog.Logger
	rejected *prometheus.CounterVec
	failed   prometheus.Counter
	trunc    prometheus.Counter
	mu       sync.Mutex
	warn     logging.OnChange
	// One read at a time (readMu), its answer kept for CacheFor: every
	// dashboard polling the fabric and `vigil fabric top` share one read
	// (about half a second for 13,000 ports) instead of each paying for it.
	readMu sync.Mutex
	cache  map[time.Duration]cached
	hits   prometheus.Counter
}

type cached struct {
	at time.Time
	f  *Fabric
}

// CacheFor is how long an answer is served again; maxCached bounds the
// windows kept.
const (
	CacheFor  = 2 * time.Second
	maxCached = 4
)

// New returns a Service.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Service{o: o, log: o.Logger, cache: map[time.Duration]cached{},
		hits: prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_fabric_cache_hits_total",
			Help: "Fabric API answers served from the last read (at most 2 s old)."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_fabric_requests_rejected_total",
			Help: "Fabric API requests refused for a bad parameter, by parameter."}, []string{"param"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_fabric_requests_failed_total",
			Help: "Fabric API requests whose queries failed (limits, timeout, store)."}),
		trunc: prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_fabric_truncated_total",
			Help: "Fabric answers that left out ports or switches beyond the bounds (65,536 ports, 4,096 switches)."}),
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(s.rejected, s.failed, s.trunc, s.hits)
	}
	return s
}

// Register serves:
//
//	GET /api/v1/fabric?window=1m
//	GET /api/v1/fabric/top?by=xmit_wait|errors|bytes&limit=20&window=1m&job=ID&link=GUID/PORT
func (s *Service) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+Path, s.serveFabric)
	mux.HandleFunc("GET "+PathTop, s.serveTop)
}

// Read returns the fabric now, its values over window. The answer is
// shared: callers must not change it.
func (s *Service) Read(ctx context.Context, window time.Duration) (*Fabric, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	now := s.o.Now()
	if c, ok := s.cache[window]; ok && now.Sub(c.at) < CacheFor && !now.Before(c.at) {
		s.hits.Inc()
		return c.f, nil
	}
	f, err := read(ctx, s.o.Query, now, window)
	s.mu.Lock()
	s.warn.Warn(s.log, "reading the fabric from the store failed", err)
	s.mu.Unlock()
	if err != nil {
		s.failed.Inc()
		return nil, err
	}
	if f.Truncated {
		s.trunc.Inc()
	}
	if len(s.cache) >= maxCached {
		clear(s.cache)
	}
	s.cache[window] = cached{at: now, f: f}
	return f, nil
}

// Top ranks the links now; job, if not empty, keeps those its nodes use.
func (s *Service) Top(ctx context.Context, window time.Duration, by string, limit int, job string) (*Top, error) {
	return s.top(ctx, Params{Window: window, By: by, Limit: limit, Job: job})
}

func (s *Service) top(ctx context.Context, p Params) (*Top, error) {
	job := p.Job
	var filter *jobs.Job
	var running []*jobs.Job
	if s.o.Jobs != nil {
		if job != "" {
			j, err := s.o.Jobs.Get(job)
			if err != nil {
				return nil, err
			}
			if j == nil {
				return nil, fmt.Errorf("%w: no such job: %s", errNotFound, job)
			}
			filter = j
		}
		var err error
		if running, err = s.o.Jobs.List(jobs.Filter{State: jobs.StateRunning, Limit: jobs.MaxLimit}); err != nil {
			return nil, err
		}
	} else if job != "" {
		return nil, fmt.Errorf("%w: no job index", errNotFound)
	}
	f, err := s.Read(ctx, p.Window)
	if err != nil {
		return nil, err
	}
	return TopOf(f, running, p.By, p.Limit, filter, p.Link), nil
}

var errNotFound = errors.New("not found")

// Params are a request's parameters, checked.
type Params struct {
	Window time.Duration
	By     string
	Limit  int
	Job    string
	// Link keeps one port: SWITCH_GUID/PORT.
	Link string
}

// ParseParams reads and bounds the API's parameters; the error names the
// parameter.
func ParseParams(q url.Values) (Params, string, error) {
	p := Params{Window: DefaultWindow, Limit: DefaultTopLimit}
	for k, v := range q {
		if len(v) != 1 || len(v[0]) > 64 {
			return p, k, fmt.Errorf("%w: %.20s: want one value of at most 64 bytes", ErrBadParam, k)
		}
	}
	if v := q.Get("window"); v != "" {
		d, err := duration.Parse(v)
		if err != nil || d < MinWindow || d > MaxWindow || d%time.Second != 0 {
			return p, "window", fmt.Errorf("%w: window %.20q: want whole seconds from %s to %s", ErrBadParam, v, MinWindow, MaxWindow)
		}
		p.Window = d
	}
	by, err := ParseBy(q.Get("by"))
	if err != nil {
		return p, "by", err
	}
	p.By = by
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxTopLimit {
			return p, "limit", fmt.Errorf("%w: limit %.20q: want 1 to %d", ErrBadParam, v, MaxTopLimit)
		}
		p.Limit = n
	}
	if v := q.Get("job"); v != "" {
		if !jobs.ValidID(v) {
			return p, "job", fmt.Errorf("%w: job %.20q: want a Slurm job id", ErrBadParam, v)
		}
		p.Job = v
	}
	if v := q.Get("link"); v != "" {
		g, port, ok := strings.Cut(v, "/")
		if !ok || g == "" || port == "" || strings.Contains(port, "/") {
			return p, "link", fmt.Errorf("%w: link %.40q: want SWITCH_GUID/PORT", ErrBadParam, v)
		}
		p.Link = v
	}
	return p, "", nil
}

func (s *Service) params(w http.ResponseWriter, r *http.Request) (Params, bool) {
	p, name, err := ParseParams(r.URL.Query())
	if err != nil {
		s.rejected.WithLabelValues(paramLabel(name)).Inc()
		jobs.WriteError(w, http.StatusBadRequest, "bad_data", err.Error())
		return p, false
	}
	return p, true
}

// paramLabel bounds the label values of the rejection counter.
func paramLabel(name string) string {
	switch name {
	case "window", "by", "limit", "job", "link":
		return name
	}
	return "other"
}

func (s *Service) serveFabric(w http.ResponseWriter, r *http.Request) {
	p, ok := s.params(w, r)
	if !ok {
		return
	}
	f, err := s.Read(r.Context(), p.Window)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeData(w, r, f)
}

// writeData answers {"status":"success","data":v}, gzipped for a client
// that takes it: the fabric of 13,000 ports is 6 MB of JSON, about a
// tenth of that compressed, polled by every open Fabric view.
func writeData(w http.ResponseWriter, r *http.Request, v any) {
	if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
		jobs.WriteData(w, v)
		return
	}
	w.Header().Set("Content-Encoding", "gzip")
	w.Header().Add("Vary", "Accept-Encoding")
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	defer zw.Close()
	jobs.WriteData(gzipResponse{ResponseWriter: w, w: zw}, v)
}

type gzipResponse struct {
	http.ResponseWriter
	w io.Writer
}

func (g gzipResponse) Write(b []byte) (int, error) { return g.w.Write(b) }

func acceptsGzip(h string) bool {
	for _, p := range strings.Split(h, ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(p), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func (s *Service) serveTop(w http.ResponseWriter, r *http.Request) {
	p, ok := s.params(w, r)
	if !ok {
		return
	}
	t, err := s.top(r.Context(), p)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeData(w, r, t)
}

func writeErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errNotFound):
		jobs.WriteError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		jobs.WriteError(w, http.StatusServiceUnavailable, "timeout", err.Error())
	default:
		jobs.WriteError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	}
}
