// Package server is `vigil server`: the store, the PromQL API and the
// remote-write receiver behind one HTTP listener, and the tree's stream
// (--listen: package wire, decoded into the store by package ingest).
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"golang.org/x/sync/errgroup"

	"github.com/vigil-hpc/vigil/internal/alerting"
	"github.com/vigil-hpc/vigil/internal/bus"
	"github.com/vigil-hpc/vigil/internal/drain"
	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/fabric"
	"github.com/vigil-hpc/vigil/internal/gctune"
	"github.com/vigil-hpc/vigil/internal/httpsec"
	"github.com/vigil-hpc/vigil/internal/ingest"
	"github.com/vigil-hpc/vigil/internal/iorecords"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/jobs/report"
	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/logsvc"
	"github.com/vigil-hpc/vigil/internal/logs/syslog"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/remotewrite"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/web"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/internal/wire/wiremetrics"
)

// gcPercent is the server's GOGC unless the environment sets one.
const gcPercent = 50

// passGCPercent is the GOGC while a rollup pass runs: its bursts of block
// writing and compaction would otherwise grow the heap by half the live
// heap every 30 minutes (store.RollupOptions.PassGCPercent).
const passGCPercent = 20

// Defaults of the server's settings.
const (
	// DefaultHTTP is loopback only: the API takes writes and answers
	// queries, so exposing it is a decision (--http :9090, ideally with
	// --web-config). See docs/security.md.
	DefaultHTTP = "127.0.0.1:9090"
	// SelfNode is the node and instance label of the server's own metrics
	// (job="vigil") in its store.
	SelfNode    = "vigil-server"
	DefaultData = "data"
)

// Server owns the store and serves the HTTP API.
type Server struct {
	cfg    Config
	log    *slog.Logger
	store  *store.Store
	rollup *store.Rollup // nil when disable_rollups is set
	api    *query.API
	rw     *RemoteWrite
	rwOut  *remotewrite.Writer // forwards ingested ticks (issue 4)
	web    *web.Handler
	logs   *logsvc.Service // nil unless syslog intake is configured
	jobs   *jobs.Manager   // the job index (docs/jobs.md)
	events *events.Store   // the event stream (docs/events.md)
	rules  *alerting.Manager
	health *drain.Manager // the nodes' health checks, drain and resume (docs/drain.md)
	// summaries writes each ended job's report figures into the index.
	summaries *summarizer
	// stragglers writes vigil_job_straggler for the running jobs.
	stragglers *stragglerWatch
	mux        *http.ServeMux
	reg        *prometheus.Registry
	httpm      *httpsec.Metrics
	key        []byte // the stream's shared key; nil: loopback peers only
	// streams is cancelled when serving stops: it ends the live streams
	// (dashboard, log tail), whose handlers otherwise hold the HTTP
	// shutdown for its whole grace period.
	streams     context.Context
	stopStreams context.CancelFunc
	closed      bool
	expected    []string // the topology's nodes: down until they connect
	bus         *bus.Bus // nil unless --amqp (docs/bus.md)

	// iorec keeps the per-file I/O records the tree sends (docs/appio.md).
	iorec *iorecords.Store
}

// New opens the store in cfg.Data and builds the handlers. Everything
// that can fail on its own (files, settings) is checked before the stores
// open and the syslog listeners bind; on an error, what was opened is
// closed again.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, mux: http.NewServeMux()}
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.httpm = httpsec.NewMetrics(s.reg)
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	if err := httpsec.Validate(cfg.WebConfig); err != nil {
		return nil, err
	}
	var groups map[string]string
	if cfg.Topology != "" {
		var err error
		if groups, err = LoadTopology(cfg.Topology); err != nil {
			return nil, err
		}
		for n := range groups {
			s.expected = append(s.expected, n)
		}
	}
	if cfg.KeyFile != "" {
		k, err := wire.LoadKey(cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("stream key: %w", err)
		}
		s.key = k
	}
	// Remote write out (issue 4): status at /api/v1/status/remote_write.
	rwOut, err := remotewrite.New(cfg.remoteWrite(), log.With("component", "remote_write_out"))
	if err != nil {
		return nil, fmt.Errorf("remote_write: %w", err)
	}
	rwOut.Job = cfg.job()
	s.rwOut = rwOut
	s.reg.MustRegister(rwOut) // shards, queue and drops per destination
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	st, err := store.Open(store.Options{
		Dir:              cfg.Data,
		Retention:        cfg.Retention.D(),
		MaxBytes:         cfg.RetentionBytes,
		OutOfOrderWindow: cfg.OutOfOrderWindow.D(),
		MaxFuture:        cfg.MaxFuture.D(),
		MinFreeBytes:     cfg.MinFreeBytes,
		Job:              cfg.job(),
		Registerer:       s.reg,
		Logger:           log.With("component", "store"),
	})
	if err != nil {
		return nil, err
	}
	s.store = st
	// What does not fit a destination's queue is read back from the store
	// (docs/remotewrite.md#backfill).
	if err := s.rwOut.Backfill(st, filepath.Join(cfg.Data, "remote_write")); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.registerMetrics()
	st.LimitSeries(store.SeriesLimits{PerNode: cfg.MaxSeriesPerNode, PerRemoteSender: cfg.MaxSeriesPerRemoteSender,
		MaxHeadSeries: cfg.MaxHeadSeries, Registerer: s.reg})
	// Rollups (issue 4): queries reaching past the raw data read minute means.
	var queryable storage.Queryable = st
	if !cfg.DisableRollups {
		ro := store.RollupOptions{Retention: cfg.RollupRetention.D(), Logger: log.With("component", "rollup")}
		if !gctune.GOGCSet() {
			ro.PassGCPercent = passGCPercent
		}
		s.rollup, err = store.OpenRollup(st, ro)
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		queryable = s.rollup.Queryable()
	}
	s.api = query.New(queryable, query.Options{
		Timeout:       cfg.QueryTimeout.D(),
		MaxSamples:    cfg.QueryMaxSamples,
		MaxConcurrent: cfg.QueryMaxConcurrent,
		Metadata:      s.metadata,
		Logger:        log.With("component", "query"),

		MaxQueued: cfg.QueryMaxQueued, MaxQueryLength: cfg.QueryMaxLength, MaxResults: cfg.QueryMaxResults,
		Registerer: s.reg,
	})
	eo := events.Options{Dir: filepath.Join(cfg.Data, "events"), Retention: cfg.EventsRetention.D(),
		Registerer: s.reg, Logger: log.With("component", "events")}
	if cfg.AMQP.Enabled() { // checked at start: a wrong URL or credentials fail here
		if s.bus, err = bus.New(cfg.AMQP, bus.Options{DataDir: cfg.Data, Registerer: s.reg, Logger: log.With("component", "bus")}); err != nil {
			return nil, errors.Join(err, s.Close())
		}
		eo.Stored = s.bus
	}
	s.events, err = events.Open(eo)
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.mux.Handle("GET "+events.PathQuery, s.events.QueryHandler())
	s.mux.Handle("GET "+events.PathStream, s.endOnStop(s.events.StreamHandler()))
	// Per-file I/O records from the tree (docs/appio.md): vigil io top.
	s.iorec, err = iorecords.Open(iorecords.Options{Dir: filepath.Join(cfg.Data, "iorecords"), Retention: cfg.IORetention.D(),
		MaxBytes: cfg.IORetentionSize, Registerer: s.reg, Logger: log.With("component", "iorecords")})
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.mux.Handle("GET "+iorecords.PathTop, s.iorec.Handler(iorecords.Limits{Concurrent: cfg.QueryMaxConcurrent, Timeout: cfg.QueryTimeout.D()}))
	// Rules (docs/alerting.md): always on, so /api/v1/rules answers.
	s.rules, err = alerting.New(alerting.Options{Files: list(cfg.Rules), Interval: cfg.RuleInterval.D(), Query: s.api.RuleInstant,
		Appendable: s.rwOut.Appendable(st), Queryable: st, Alertmanagers: list(cfg.Alertmanager), ExternalURL: externalURL(cfg.HTTP),
		Registerer: s.reg, Logger: log.With("component", "rules"),
		Events: s.events,
	})
	if err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.rules.Register(s.mux)
	s.mux.HandleFunc("POST /-/reload", s.reload)
	rq := report.APIQuerier{API: s.api}
	if s.rollup != nil {
		rq.Watermark = s.rollup.Watermark
	}
	jo := cfg.jobsOptions(s.reg, log)
	jo.EventSink = s.events
	// The report and the summaries list the job's top files; the
	// straggler watch has no use for them.
	frq := rq
	frq.Files = s.jobFiles
	summaries := newSummarizer(frq, log.With("component", "jobs"))
	jo.OnEnd = summaries.ended
	if s.jobs, err = jobs.New(jo); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	summaries.jobs = s.jobs
	s.summaries = summaries
	s.stragglers = newStragglerWatch(rq, s.jobs, s.rwOut.Appendable(st).Appender, s.reg, log.With("component", "stragglers"))
	s.jobs.Register(s.mux)
	s.mux.Handle("GET /api/v1/jobs/{id}/report", report.Handler(s.getJob, frq))
	fabric.New(fabric.Options{Query: s.api, Jobs: s.jobs.Index(), Registerer: s.reg, Logger: log.With("component", "fabric")}).Register(s.mux)
	ho := cfg.drainOptions(s.reg, log)
	ho.Events = s.events
	if s.health, err = drain.New(ho); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	s.health.Register(s.mux)
	s.rw = NewRemoteWrite(st, log.With("component", "remote_write"))
	s.rw.register(s.reg)
	s.rw.forward = s.rwOut
	s.mux.Handle("GET /api/v1/status/remote_write", s.rwOut.Handler())
	s.api.Register(s.mux)
	if cfg.SyslogUDP != "" || cfg.SyslogTCP != "" || cfg.SyslogTLS != "" || cfg.SyslogRELP != "" {
		var stored func([]logstore.Record)
		if s.bus != nil {
			stored = s.bus.Logs
		}
		s.logs, err = logsvc.New(logsvc.Config{
			Stored:  stored,
			UDPAddr: cfg.SyslogUDP, TCPAddr: cfg.SyslogTCP, TLSAddr: cfg.SyslogTLS,
			TLSCert: cfg.SyslogTLSCert, TLSKey: cfg.SyslogTLSKey, RELPAddr: cfg.SyslogRELP,
			DataDir: filepath.Join(cfg.Data, "logs"), Retention: cfg.LogsRetention.D(), MaxBytes: cfg.LogsMaxBytes,
			Registerer: s.reg, UDPReadBuffer: cfg.SyslogUDPBuffer,
			Limits: syslog.Limits{MaxConns: cfg.SyslogMaxConns, MaxConnsPerHost: cfg.SyslogMaxConnsPerHost,
				IdleTimeout: cfg.SyslogIdleTimeout.D(), FrameTimeout: cfg.SyslogFrameTimeout.D()},
			// Per-pattern counts as the server's own series (docs/logs.md).
			Metrics: logsvc.MetricsConfig{Appendable: s.rwOut.Appendable(st), Interval: cfg.LogsMetricsInterval.D(), MaxPatternSeries: cfg.LogsMaxPatternSeries,
				Labels:   labels.FromStrings("job", SelfJob, "instance", SelfNode, store.NodeLabel, SelfNode),
				Metadata: func(name, typ, help string) { st.SetMetadata(name, store.Metadata{Type: typ, Help: help}) }},
			Events: s.events,
		}, log.With("component", "logs"))
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
		logs := s.logs.Handler()
		s.mux.Handle("/api/v1/logs/", logs)
		s.mux.Handle("GET /api/v1/logs/tail", s.endOnStop(logs))
	} else {
		s.mux.HandleFunc("/api/v1/logs/", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"status":"error","errorType":"unavailable","error":"log intake is off: start vigil server with --syslog-udp or --syslog-tcp"}`+"\n")
		})
	}
	s.web = web.New(web.Options{Source: webSource{api: s.api, groups: groups}, Logger: log.With("component", "web"), Interval: cfg.Interval.D()})
	s.mux.Handle("/", s.web)
	s.mux.Handle("GET /api/web/live", s.endOnStop(s.web))
	if cfg.EnableRemoteWriteReceiver {
		s.mux.Handle("POST /api/v1/write", s.rw)
	} else {
		s.mux.HandleFunc("POST /api/v1/write", s.rw.disabled)
	}
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), MaxRequestsInFlight: 4,
	}))
	if cfg.DebugPprof {
		httpsec.RegisterPprof(s.mux)
	}
	s.mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Vigil is Healthy.\n") })
	s.mux.HandleFunc("GET /-/ready", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "Vigil is Ready.\n")
		if err := st.Writable(); err != nil { // queries work; storing does not
			io.WriteString(w, "Read-only: "+err.Error()+"\n")
		}
	})
	s.mux.HandleFunc("GET /api/v1/status/store", s.storeStatus)
	return s, nil
}

// endOnStop ends h's requests when serving stops. For live streams: the
// HTTP shutdown lets requests in flight finish, and a stream finishes
// only when its request's context ends.
func (s *Server) endOnStop(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(s.streams, cancel)()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// Events is the server's event store, the one sink of every producer.
func (s *Server) Events() *events.Store { return s.events }

// Jobs is the server's job index.
func (s *Server) Jobs() *jobs.Manager { return s.jobs }

// getJob looks a job up for its report.
func (s *Server) getJob(id string) (jobs.Job, bool) {
	j, err := s.jobs.Index().Get(id)
	if err != nil || j == nil {
		return jobs.Job{}, false
	}
	return *j, true
}

// Store is the server's store.
func (s *Server) Store() *store.Store { return s.store }

// Handler serves the API and the dashboard, counting requests.
func (s *Server) Handler() http.Handler { return s.httpm.Instrument(s.mux) }

// Registry holds the server's own metrics (served on /metrics and stored
// under job="vigil").
func (s *Server) Registry() *prometheus.Registry { return s.reg }

func (s *Server) metadata() map[string]query.Metadata {
	md := s.store.Metadata()
	out := make(map[string]query.Metadata, len(md))
	for k, v := range md {
		out[k] = query.Metadata{Type: v.Type, Help: v.Help, Unit: v.Unit}
	}
	return out
}

// Serve answers HTTP on ln and, if streamLn is not nil, the tree's stream
// on streamLn until ctx ends, then shuts down in reverse order: stop
// accepting, let requests and connections finish, close the store.
func (s *Server) Serve(ctx context.Context, ln, streamLn net.Listener) error {
	s.logHTTPSecurity(ln.Addr().String())
	hup := notifyHUP() // before serving: a SIGHUP must not kill a server that answers
	// The stream's handler and metrics are made before anything serves,
	// so the first scrape of /metrics already has them.
	var h *ingest.Handler
	var wopts wire.ServerOptions
	if streamLn != nil {
		var ist ingest.Store = s.store
		var offsets ingest.OffsetStore = s.store
		if len(s.cfg.remoteWrite()) > 0 {
			ist = s.rwOut.Tap(s.store)
			offsets = s.rwOut.TapNodeGauges(s.store) // the clock offsets are the nodes' series too
		}
		taps := ingest.Taps{s.jobs, s.health}
		if s.bus != nil {
			taps = append(taps, s.bus)
		}
		h = ingest.NewWithOptions(ist, ingest.Options{Interval: s.cfg.Interval.D(), MaxClockOffset: s.cfg.MaxFuture.D(),
			Offsets: offsets, Registerer: s.reg, Logger: s.log, Expected: s.expected, Tap: taps, Events: s.events})
		s.registerIngest(h)
		wopts = wire.ServerOptions{Key: s.key, Name: "server", Log: s.log, Metrics: wiremetrics.New(s.reg)}
		s.cfg.WireLimits.Apply(&wopts)
	}
	g, gctx := errgroup.WithContext(ctx)
	defer context.AfterFunc(gctx, s.stopStreams)()
	g.Go(func() error {
		return httpsec.Serve(gctx, ln, s.Handler(), httpsec.Options{
			WebConfigFile: s.cfg.WebConfig, ConnState: s.httpm.ConnState, Outer: s.httpm.Outer, Logger: s.log.With("component", "http"),
		})
	})
	// At least a second apart: at a 10 ms interval, 190 series of its own
	// would cost the server more than they tell.
	g.Go(func() error { s.selfScrape(gctx, max(s.cfg.Interval.D(), time.Second)); return nil })
	if s.logs != nil {
		g.Go(func() error { return s.logs.Run(gctx) })
	}
	if s.rollup != nil {
		g.Go(func() error { return s.rollup.Run(gctx) })
	}
	g.Go(func() error { s.jobs.Run(gctx); return nil })
	g.Go(func() error { return s.rules.Run(gctx) })
	g.Go(func() error { s.reloadOnHUP(gctx, hup); return nil })
	g.Go(func() error { s.summaries.run(gctx); return nil })
	g.Go(func() error { s.stragglers.run(gctx); return nil })
	g.Go(func() error { s.health.Run(gctx); return nil })
	g.Go(func() error { s.iorec.RetainEvery(gctx, time.Minute); return nil })
	if s.bus != nil {
		g.Go(func() error { return s.bus.Run(gctx) })
	}
	if len(s.cfg.remoteWrite()) > 0 {
		// Remote write out sends what the tree and remote write in stored.
		g.Go(func() error { return s.rwOut.Run(gctx) })
	}
	if streamLn != nil {
		g.Go(func() error { h.Run(gctx); return nil })
		g.Go(func() error { return wire.Serve(gctx, streamLn, wopts, s.iorec.Tap(h)) })
	}
	err := g.Wait()
	return errors.Join(err, s.Close())
}

// Close releases everything New opened, in reverse order: the log
// service (listeners and log store, also when it never ran), the rollup
// and the store. Serve calls it when it returns; more calls do nothing.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.stopStreams()
	var errs []error
	if s.logs != nil {
		errs = append(errs, s.logs.Close())
	}
	if s.jobs != nil {
		errs = append(errs, s.jobs.Close())
	}
	if s.iorec != nil {
		errs = append(errs, s.iorec.Close())
	}
	if s.events != nil { // after its producers
		errs = append(errs, s.events.Close())
	}
	if s.bus != nil { // after the logs and events it is fed from
		errs = append(errs, s.bus.Close())
	}
	if s.rollup != nil {
		errs = append(errs, s.rollup.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	return errors.Join(errs...)
}

// Run binds the HTTP listener (cfg.HTTP) and, if set, the stream
// listener (cfg.Listen), and serves until ctx ends; the server is closed
// when Run returns.
func (s *Server) Run(ctx context.Context) error {
	cfg, log := s.cfg, s.log
	// The live heap is mostly the TSDB head, long-lived and slowly
	// allocated (a few MB/s at 165,000 series), so collecting at +50 %
	// instead of +100 % costs little CPU and keeps RSS near the live heap.
	gctune.Apply(log, gcPercent)
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return errors.Join(fmt.Errorf("listen on --http %s: %w", cfg.HTTP, err), s.Close())
	}
	var streamLn net.Listener
	if cfg.Listen != "" {
		if streamLn, err = net.Listen("tcp", cfg.Listen); err != nil {
			ln.Close()
			return errors.Join(fmt.Errorf("listen on --listen %s: %w", cfg.Listen, err), s.Close())
		}
	}
	log.Info("vigil server started", "http", ln.Addr().String(), "listen", cfg.Listen, "data", cfg.Data, "retention", cfg.Retention.String())
	err = s.Serve(ctx, ln, streamLn)
	log.Info("vigil server stopped", "err", err)
	return err
}
