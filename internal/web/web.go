// Package web serves the dashboard: the single-page app built from web/ and
// embedded at compile time, plus the live heatmap stream and the small JSON
// endpoints the app needs beside the Prometheus HTTP API.
//
// Routes (relative to where the handler is mounted):
//
//	/                  the app (or a "UI not built" page on a fresh clone)
//	/assets...         bundled JavaScript and CSS
//	/api/web/live      heatmap frames as Server-Sent Events (see live.go)
//	/api/web/nodes     node list with up state, JSON
//	/api/web/tree      aggregator tree status, JSON ({"tree": null} if none)
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// dist holds the output of `cd web && npm ci && npm run build`. Only
// dist/.keep is committed, so a fresh clone builds and serves notBuiltPage.
//
//go:embed all:dist
var dist embed.FS

// NodeInfo is one node as the heatmap knows it.
type NodeInfo struct {
	Name string `json:"name"`
	Up   bool   `json:"up"`
	// Group is an optional rack or partition name. When empty the app derives
	// one from the node name (letters prefix, then racks of 32 counted from 1).
	Group string `json:"group,omitempty"`
}

// ErrBadQuery marks errors caused by the expression itself (parse or type
// errors), as opposed to a storage failure. A live stream ends on it.
var ErrBadQuery = errors.New("bad query")

// Source is what the dashboard needs from the query side. Implementations
// must be safe for concurrent use: every live stream calls them.
type Source interface {
	// NodeValues evaluates expr as an instant query at t and returns one
	// value per node, keyed by the `node` label of the result series. Series
	// without that label are ignored by the implementation. Errors due to
	// the expression should wrap ErrBadQuery.
	NodeValues(ctx context.Context, expr string, t time.Time) (map[string]float64, error)
	// Nodes lists every known node with its up state, in any order.
	Nodes(ctx context.Context) ([]NodeInfo, error)
	// Tree returns the aggregator tree status as a JSON-encodable value, or
	// nil when there is no tree (a single server).
	Tree(ctx context.Context) (any, error)
}

// Options configures New.
type Options struct {
	Source Source
	Logger *slog.Logger
	// MaxStreams bounds concurrent live streams; 0 means 64.
	MaxStreams int
	// Interval is the default and minimum period of live frames; 0 means 1s.
	Interval time.Duration
	// Assets replaces the embedded build output (tests); nil uses it.
	Assets fs.FS
}

// Stats are counters of the live endpoint since the handler was created.
type Stats struct {
	StreamsActive   int64
	StreamsRejected int64
	Frames          int64
	FrameBytes      int64 // bytes of frame events, SSE framing included
	NodeListEvents  int64
	Errors          int64
}

// Handler is the dashboard handler returned by New.
type Handler struct {
	src      Source
	log      *slog.Logger
	interval time.Duration
	slots    chan struct{}
	mux      *http.ServeMux
	built    bool

	active, rejected, frames, frameBytes, nodeLists, errs atomic.Int64
}

// New returns the dashboard handler. It panics if opts.Source is nil, which
// is a programming error of the caller.
func New(opts Options) *Handler {
	if opts.Source == nil {
		panic("web.New: nil Source")
	}
	h := &Handler{
		src:      opts.Source,
		log:      opts.Logger,
		interval: opts.Interval,
		mux:      http.NewServeMux(),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.log = h.log.With("component", "web")
	if h.interval <= 0 {
		h.interval = time.Second
	}
	n := opts.MaxStreams
	if n <= 0 {
		n = 64
	}
	h.slots = make(chan struct{}, n)

	assets := opts.Assets
	if assets == nil {
		sub, err := fs.Sub(dist, "dist")
		if err != nil {
			panic(err) // "dist" is a valid literal path
		}
		assets = sub
	}
	_, err := fs.Stat(assets, "index.html")
	h.built = err == nil

	h.mux.HandleFunc("GET /api/web/live", h.serveLive)
	h.mux.HandleFunc("GET /api/web/nodes", h.serveNodes)
	h.mux.HandleFunc("GET /api/web/tree", h.serveTree)
	if h.built {
		files := http.FileServerFS(assets)
		h.mux.Handle("GET /", noCache(files))
		// Browsers and bookmarks ask for /favicon.ico whatever the page
		// links; the SVG answers it rather than a 404.
		h.mux.Handle("GET /favicon.ico", noCache(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.ServeFileFS(w, r, assets, "favicon.svg")
		})))
	} else {
		h.mux.HandleFunc("GET /", serveNotBuilt)
	}
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Stats returns a snapshot of the live endpoint counters.
func (h *Handler) Stats() Stats {
	return Stats{
		StreamsActive:   h.active.Load(),
		StreamsRejected: h.rejected.Load(),
		Frames:          h.frames.Load(),
		FrameBytes:      h.frameBytes.Load(),
		NodeListEvents:  h.nodeLists.Load(),
		Errors:          h.errs.Load(),
	}
}

// noCache makes browsers revalidate: embedded files carry no modification
// time, and a new binary must not be paired with an old cached bundle.
func noCache(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

const notBuiltPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>Vigil</title></head>
<body style="font-family:sans-serif;margin:3em">
<h1>Vigil: the web UI was not built</h1>
<p>This binary was built without the dashboard assets. Run <code>make web</code>
(or <code>cd web &amp;&amp; npm ci &amp;&amp; npm run build</code>) and rebuild vigil.</p>
<p>The Prometheus API under <code>/api/v1/</code> works without it.</p>
</body></html>
`

func serveNotBuilt(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/index.html" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(notBuiltPage))
}

func (h *Handler) serveNodes(w http.ResponseWriter, r *http.Request) {
	nodes, err := h.src.Nodes(r.Context())
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "list nodes: "+err.Error())
		return
	}
	sortNodes(nodes)
	writeJSON(w, map[string]any{"nodes": nodes})
}

func (h *Handler) serveTree(w http.ResponseWriter, r *http.Request) {
	tree, err := h.src.Tree(r.Context())
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "aggregator tree: "+err.Error())
		return
	}
	writeJSON(w, map[string]any{"tree": tree})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
