package server

import (
	"net/http"
	"net/http/pprof"
)

// registerPprof serves Go's profiles under /debug/pprof/ (--debug-pprof).
// They go on the server's own mux rather than http.DefaultServeMux, so
// they sit behind the same web config (TLS, basic auth) as the API and
// exist only when asked for.
func registerPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
