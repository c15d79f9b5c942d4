// Package lean serves an HTTP listener with the limits every Vigil listener
// has (connection cap, timeouts, header size) and, for the node sampler, the
// core of Prometheus' web configuration format: TLS with optional client
// certificates and bcrypt basic auth. It links neither client_golang nor
// exporter-toolkit, which would make bin/vigil-sampler 65% larger and add
// about 4 MB of resident memory on every compute node; package httpsec
// serves the full format on the server and aggregators.
package lean

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"golang.org/x/net/netutil"
)

// Defaults of Options.
const (
	// DefaultMaxConnections bounds open connections per listener; further
	// clients wait in the kernel's accept queue instead of costing memory.
	DefaultMaxConnections = 512
	// DefaultReadTimeout leaves room for a 32 MiB remote-write body on a
	// slow link while a client trickling bytes is cut off.
	DefaultReadTimeout       = time.Minute
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultWriteTimeout bounds one answer; it is above the default query
	// timeout (2m) so a slow query still gets its error answered. Event
	// streams (text/event-stream) are exempt.
	DefaultWriteTimeout = 3 * time.Minute
	DefaultIdleTimeout  = 2 * time.Minute
	// DefaultMaxHeaderBytes is far above what browsers and Prometheus
	// clients send, far below net/http's 1 MiB.
	DefaultMaxHeaderBytes = 64 << 10
	// ShutdownGrace is how long requests in flight may finish at shutdown.
	ShutdownGrace = 10 * time.Second
)

// Options configure one listener. Zero values mean the defaults.
type Options struct {
	// WebConfigFile is a Prometheus web configuration file; empty: plain
	// HTTP without authentication.
	WebConfigFile  string
	MaxConnections int
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	IdleTimeout    time.Duration
	MaxHeaderBytes int
	// ConnState, if set, is told about every connection (metrics).
	ConnState func(net.Conn, http.ConnState)
	// Outer, if set, wraps the handler outside authentication, so requests
	// refused there (401) can be counted.
	Outer  func(http.Handler) http.Handler
	Logger *slog.Logger
}

// Defaults fills zero fields.
func (o *Options) Defaults() {
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// NewServer returns a server for h with o's limits (after o.Defaults)
// and ln capped at o.MaxConnections.
func NewServer(ln net.Listener, h http.Handler, o Options) (net.Listener, *http.Server) {
	return netutil.LimitListener(ln, o.MaxConnections), &http.Server{
		Handler:           writeDeadline(h, o.WriteTimeout),
		ReadTimeout:       o.ReadTimeout,
		ReadHeaderTimeout: min(DefaultReadHeaderTimeout, o.ReadTimeout),
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ConnState:         o.ConnState,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
}

// Run serves srv on ln with serve until ctx ends, then shuts srv down.
func Run(ctx context.Context, ln net.Listener, srv *http.Server, serve func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	serr := srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	}
	if serr != nil {
		return fmt.Errorf("shut down http on %s: %w", ln.Addr(), serr)
	}
	return nil
}

// Serve answers HTTP (or HTTPS) on ln with h until ctx ends, as the web
// config says. It closes ln.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o Options) error {
	o.Defaults()
	var wc *WebConfig
	if o.WebConfigFile != "" {
		var err error
		if wc, err = LoadWebConfig(o.WebConfigFile); err != nil {
			ln.Close()
			return err
		}
		h = wc.Authenticate(h)
	}
	lln, srv := NewServer(ln, h, o)
	if o.Outer != nil {
		srv.Handler = o.Outer(srv.Handler)
	}
	if wc != nil && wc.TLS != nil {
		srv.TLSConfig = wc.TLS
		return Run(ctx, ln, srv, func() error { return srv.ServeTLS(lln, "", "") })
	}
	return Run(ctx, ln, srv, func() error { return srv.Serve(lln) })
}

// writeDeadline bounds the time to answer one request; server-sent event
// streams (Content-Type text/event-stream) run for as long as the client
// stays.
func writeDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(&streamWriter{ResponseWriter: w, rc: rc}, r)
	})
}

// streamWriter lifts the write deadline when the answer is an event stream.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	checked bool
}

func (w *streamWriter) check() {
	if w.checked {
		return
	}
	w.checked = true
	if w.Header().Get("Content-Type") == "text/event-stream" {
		_ = w.rc.SetWriteDeadline(time.Time{})
	}
}

func (w *streamWriter) WriteHeader(code int) { w.check(); w.ResponseWriter.WriteHeader(code) }

func (w *streamWriter) Write(b []byte) (int, error) { w.check(); return w.ResponseWriter.Write(b) }

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *streamWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// IsLoopback reports whether a listen address ("127.0.0.1:9090", "[::1]:0",
// "localhost:9090") accepts only local peers. ":9090" and "0.0.0.0:9090"
// do not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
