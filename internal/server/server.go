// Package server is `vigil server`: the store, the PromQL API and the
// remote-write receiver behind one HTTP listener, and the tree's stream
// (--listen: package wire, decoded into the store by package ingest).
package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/ingest"
	"github.com/vigil-hpc/vigil/internal/logs/logsvc"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/remotewrite"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/web"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// Defaults of the server's settings.
const (
	DefaultHTTP = ":9090"
	DefaultData = "data"
	// shutdownGrace bounds how long in-flight requests may finish.
	shutdownGrace = 10 * time.Second
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
	mux    *http.ServeMux
	reg    *prometheus.Registry
	closed bool
}

// New opens the store in cfg.Data and builds the handlers.
func New(cfg Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := store.Open(store.Options{
		Dir:              cfg.Data,
		Retention:        cfg.Retention.D(),
		MaxBytes:         cfg.RetentionBytes,
		OutOfOrderWindow: cfg.OutOfOrderWindow.D(),
		Logger:           log.With("component", "store"),
	})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, store: st, mux: http.NewServeMux()}
	s.reg = prometheus.NewRegistry()
	st.LimitSeries(store.SeriesLimits{PerNode: cfg.MaxSeriesPerNode, PerRemoteSender: cfg.MaxSeriesPerRemoteSender,
		MaxHeadSeries: cfg.MaxHeadSeries, Registerer: s.reg})
	// Rollups (issue 4): queries reaching past the raw data read minute means.
	var queryable storage.Queryable = st
	if !cfg.DisableRollups {
		s.rollup, err = store.OpenRollup(st, store.RollupOptions{Retention: cfg.RollupRetention.D(), Logger: log.With("component", "rollup")})
		if err != nil {
			st.Close()
			return nil, err
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
	s.rw = NewRemoteWrite(st, log.With("component", "remote_write"))
	// Remote write out (issue 4): status at /api/v1/status/remote_write.
	if s.rwOut, err = remotewrite.New(cfg.remoteWrite(), log.With("component", "remote_write_out")); err != nil {
		s.Close()
		return nil, fmt.Errorf("remote_write: %w", err)
	}
	s.rw.forward = s.rwOut
	s.mux.Handle("GET /api/v1/status/remote_write", s.rwOut.Handler())
	s.api.Register(s.mux)
	if cfg.SyslogUDP != "" || cfg.SyslogTCP != "" || cfg.SyslogTLS != "" {
		s.logs, err = logsvc.New(logsvc.Config{
			UDPAddr: cfg.SyslogUDP, TCPAddr: cfg.SyslogTCP, TLSAddr: cfg.SyslogTLS,
			TLSCert: cfg.SyslogTLSCert, TLSKey: cfg.SyslogTLSKey,
			DataDir: filepath.Join(cfg.Data, "logs"), Retention: cfg.LogsRetention.D(), MaxBytes: cfg.LogsMaxBytes,
		}, log.With("component", "logs"))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.mux.Handle("/api/v1/logs/", s.logs.Handler())
	} else {
		s.mux.HandleFunc("/api/v1/logs/", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"status":"error","errorType":"unavailable","error":"log intake is off: start vigil server with --syslog-udp or --syslog-tcp"}`+"\n")
		})
	}
	var groups map[string]string
	if cfg.Topology != "" {
		if groups, err = LoadTopology(cfg.Topology); err != nil {
			st.Close()
			return nil, err
		}
	}
	s.web = web.New(web.Options{Source: webSource{api: s.api, groups: groups}, Logger: log.With("component", "web"), Interval: cfg.Interval.D()})
	s.mux.Handle("/", s.web)
	s.mux.Handle("POST /api/v1/write", s.rw)
	s.mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Vigil is Healthy.\n") })
	s.mux.HandleFunc("GET /-/ready", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "Vigil is Ready.\n") })
	return s, nil
}

// Store is the server's store.
func (s *Server) Store() *store.Store { return s.store }

// Handler serves the API; the dashboard will be mounted beside it.
func (s *Server) Handler() http.Handler { return s.mux }

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
	var key []byte
	if streamLn != nil && s.cfg.KeyFile != "" {
		k, err := wire.LoadKey(s.cfg.KeyFile)
		if err != nil {
			ln.Close()
			streamLn.Close()
			return errors.Join(fmt.Errorf("stream key: %w", err), s.Close())
		}
		key = k
	}
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
		}
		return nil
	})
	if s.logs != nil {
		g.Go(func() error { return s.logs.Run(gctx) })
	}
	if s.rollup != nil {
		g.Go(func() error { return s.rollup.Run(gctx) })
	}
	if len(s.cfg.remoteWrite()) > 0 {
		// Remote write out sends what the tree and remote write in stored.
		g.Go(func() error { return s.rwOut.Run(gctx) })
	}
	if streamLn != nil {
		var ist ingest.Store = s.store
		if len(s.cfg.remoteWrite()) > 0 {
			ist = s.rwOut.Tap(s.store)
		}
		h := ingest.New(ist, s.cfg.Interval.D(), s.log)
		g.Go(func() error { h.Run(gctx); return nil })
		g.Go(func() error {
			return wire.Serve(gctx, streamLn, wire.ServerOptions{Key: key, Name: "server", Log: s.log}, h)
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			return fmt.Errorf("shut down http: %w", err)
		}
		return nil
	})
	err := g.Wait()
	return errors.Join(err, s.Close())
}

// Close closes the store; call it once, after serving stopped.
func (s *Server) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var rerr error
	if s.rollup != nil {
		rerr = s.rollup.Close()
	}
	return errors.Join(rerr, s.store.Close())
}

// Run is `vigil server`.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vigil server [--config FILE] [--http ADDR] [--listen ADDR] [--data DIR] [flags]")
		fmt.Fprintln(stderr, "\nStores samples and serves the Prometheus HTTP API (query, query_range, series,")
		fmt.Fprintln(stderr, "labels, metadata) and remote write (POST /api/v1/write) on --http; takes the")
		fmt.Fprintln(stderr, "samplers' or aggregators' stream on --listen.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := f.config(fs)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("listen on --http %s: %w", cfg.HTTP, err)
	}
	var streamLn net.Listener
	if cfg.Listen != "" {
		if streamLn, err = net.Listen("tcp", cfg.Listen); err != nil {
			ln.Close()
			return fmt.Errorf("listen on --listen %s: %w", cfg.Listen, err)
		}
	}
	s, err := New(cfg, log)
	if err != nil {
		ln.Close()
		if streamLn != nil {
			streamLn.Close()
		}
		return err
	}
	log.Info("vigil server started", "http", ln.Addr().String(), "listen", cfg.Listen, "data", cfg.Data, "retention", cfg.Retention.String())
	err = s.Serve(ctx, ln, streamLn)
	log.Info("vigil server stopped", "err", err)
	return err
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}
