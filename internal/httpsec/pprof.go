package httpsec

import (
	"net/http"
	"net/http/pprof"
)

// RegisterPprof serves Go's profiles under /debug/pprof/ on mux (a
// daemon's --debug-pprof). They go on the daemon's own mux rather than
// http.DefaultServeMux, so they sit behind the same web config (TLS, basic
// auth) as the rest of its HTTP and exist only when asked for.
func RegisterPprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
