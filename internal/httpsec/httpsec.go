// Package httpsec serves the HTTP listeners of the server and aggregators
// the way Prometheus does: TLS, client certificates and bcrypt basic auth
// from a web configuration file (github.com/prometheus/exporter-toolkit/web),
// with the connection cap, timeouts and header bound of package lean.
package httpsec

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/vigil-hpc/vigil/internal/httpsec/lean"
)

// Options configure one listener; zero values mean lean's defaults.
type Options = lean.Options

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
	o.Defaults()
	if err := Validate(o.WebConfigFile); err != nil {
		ln.Close()
		return err
	}
	lln, srv := lean.NewServer(ln, h, o)
	if o.Outer != nil {
		lln = &outerListener{Listener: lln, srv: srv, outer: o.Outer}
	}
	file := o.WebConfigFile
	// The toolkit logs each listener and its TLS state at info.
	return lean.Run(ctx, ln, srv, func() error {
		return web.Serve(lln, srv, &web.FlagConfig{WebConfigFile: &file}, o.Logger)
	})
}

// IsLoopback reports whether a listen address accepts only local peers.
func IsLoopback(addr string) bool { return lean.IsLoopback(addr) }

// outerListener wraps the handler the toolkit installs (authentication
// around h) in Outer at the first Accept: web.Serve sets srv.Handler and
// then accepts on the same goroutine, before any request is served, so
// the swap races with nothing.
type outerListener struct {
	net.Listener
	srv     *http.Server
	outer   func(http.Handler) http.Handler
	wrapped bool
}

func (l *outerListener) Accept() (net.Conn, error) {
	if !l.wrapped {
		l.wrapped = true
		l.srv.Handler = l.outer(l.srv.Handler)
	}
	return l.Listener.Accept()
}
