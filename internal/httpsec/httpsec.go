// Package httpsec serves Vigil's HTTP listeners the way Prometheus does:
// TLS, client certificates and bcrypt basic auth from a web configuration
// file (github.com/prometheus/exporter-toolkit/web), with a connection cap,
// timeouts and a header size bound on every listener.
package httpsec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
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
	// timeout (2m) so a slow query still gets its error answered. Streams
	// (text/event-stream) are exempt.
	DefaultWriteTimeout = 3 * time.Minute
	DefaultIdleTimeout  = 2 * time.Minute
	// DefaultMaxHeaderBytes is far above what browsers and Prometheus
	// clients send, far below net/http's 1 MiB.
	DefaultMaxHeaderBytes = 64 << 10
	shutdownGrace         = 10 * time.Second
)

// Options configure one listener. Zero values mean the defaults.
type Options struct {
	// WebConfigFile is a Prometheus web configuration file (TLS, client
	// certificates, basic_auth_users with bcrypt hashes); empty: plain
	// HTTP without authentication.
	WebConfigFile  string
	MaxConnections int
	ReadTimeout    time.Duration
	WriteTimeout   time.Duration
	IdleTimeout    time.Duration
	MaxHeaderBytes int
	// ConnState, if set, is told about every connection (metrics).
	ConnState func(net.Conn, http.ConnState)
	Logger    *slog.Logger
}

func (o *Options) defaults() {
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

// Validate checks a web configuration file (its YAML, TLS files and
// bcrypt hashes) so a daemon fails at start-up, not at the first request.
func Validate(file string) error {
	if file == "" {
		return nil
	}
	if err := web.Validate(file); err != nil {
		return fmt.Errorf("web config %s: %w", file, err)
	}
	return nil
}

// Serve answers HTTP on ln with h until ctx ends, then lets requests in
// flight finish for a few seconds. It closes ln.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o Options) error {
	o.defaults()
	if err := Validate(o.WebConfigFile); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           writeDeadline(h, o.WriteTimeout),
		ReadTimeout:       o.ReadTimeout,
		ReadHeaderTimeout: min(DefaultReadHeaderTimeout, o.ReadTimeout),
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ConnState:         o.ConnState,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
	}
	file := o.WebConfigFile
	errc := make(chan error, 1)
	go func() {
		// The toolkit logs every listener at info; only its errors matter here.
		errc <- web.Serve(netutil.LimitListener(ln, o.MaxConnections), srv, &web.FlagConfig{WebConfigFile: &file},
			slog.New(o.Logger.Handler()).With("component", "web_config"))
	}()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve http on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
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
