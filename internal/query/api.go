// Package query evaluates PromQL over the store and serves the Prometheus
// HTTP API v1, so Grafana's Prometheus data source and promtool work
// unchanged. It is the only package that imports prometheus/promql.
package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/vigil-hpc/vigil/internal/buildinfo"
)

// Defaults for Options fields left zero.
const (
	DefaultTimeout    = 2 * time.Minute
	DefaultMaxSamples = 50_000_000
	DefaultLookback   = 5 * time.Minute
	// maxPoints is Prometheus' limit on steps of a range query.
	maxPoints = 11000
)

// Options are the engine's limits.
type Options struct {
	// Timeout bounds one query, including the wait for a free slot.
	Timeout time.Duration
	// MaxSamples bounds the samples one query may hold in memory.
	MaxSamples int
	// MaxConcurrent bounds heavy queries evaluated at once (0: GOMAXPROCS,
	// as a range query already spreads over the cores; more at once only
	// multiplies memory and takes CPU from ingest). MaxQueued more wait
	// for a slot (0: 4*MaxConcurrent); beyond that a query is refused at
	// once with 503 and Retry-After. Metadata requests (series, labels,
	// label values) run in this lane too.
	MaxConcurrent int
	MaxQueued     int
	// Queries that read at most FastSpan of data (range plus longest
	// selector window; 0: DefaultFastSpan) run in a lane of their own,
	// FastConcurrent at once (0: GOMAXPROCS, at least 2) with as many
	// waiting, under FastMaxSamples (0: DefaultFastMaxSamples); one that
	// needs more runs again in the heavy lane. So `up == 0` answers while
	// the heavy lane is full.
	FastSpan       time.Duration
	FastConcurrent int
	FastMaxSamples int
	// MaxQueryLength (0: DefaultMaxQueryLength) and MaxQueryDepth, the
	// bracket nesting (0: DefaultMaxQueryDepth), bound an expression
	// before it is parsed.
	MaxQueryLength int
	MaxQueryDepth  int
	// MaxResults bounds the answers of series, labels and label values
	// (0: DefaultMaxResults); a request's smaller limit applies first.
	// Truncated answers carry a warning, as in Prometheus.
	MaxResults int
	// Registerer gets the query metrics; nil registers none.
	Registerer prometheus.Registerer
	// LookbackDelta is how far back an instant selector looks.
	LookbackDelta time.Duration
	// Metadata supplies /api/v1/metadata; nil serves an empty result.
	Metadata func() map[string]Metadata
	Logger   *slog.Logger
}

// Metadata is the HELP/TYPE information of one metric name.
type Metadata struct {
	Type string `json:"type"`
	Help string `json:"help"`
	Unit string `json:"unit"`
}

// API serves PromQL over a storage.Queryable.
type API struct {
	q          storage.Queryable
	ng         *promql.Engine
	engineOpts promql.EngineOpts
	// partEngines are the engines for split queries, by number of parts:
	// at most GOMAXPROCS+1 of them (split.go, shard.go).
	partMu      sync.Mutex
	partEngines map[int]*promql.Engine
	fastNg      *promql.Engine
	heavy       *lane
	fastLane    *lane
	metrics     *metrics
	opts        Options
	log         *slog.Logger
}

// New returns an API over q.
func New(q storage.Queryable, opts Options) *API {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxSamples <= 0 {
		opts.MaxSamples = DefaultMaxSamples
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = runtime.GOMAXPROCS(0)
	}
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = 4 * opts.MaxConcurrent
	}
	if opts.FastSpan <= 0 {
		opts.FastSpan = DefaultFastSpan
	}
	if opts.FastConcurrent <= 0 {
		opts.FastConcurrent = max(2, runtime.GOMAXPROCS(0))
	}
	if opts.FastMaxSamples <= 0 {
		opts.FastMaxSamples = DefaultFastMaxSamples
	}
	if opts.MaxQueryLength <= 0 {
		opts.MaxQueryLength = DefaultMaxQueryLength
	}
	if opts.MaxQueryDepth <= 0 {
		opts.MaxQueryDepth = DefaultMaxQueryDepth
	}
	if opts.MaxResults <= 0 {
		opts.MaxResults = DefaultMaxResults
	}
	if opts.LookbackDelta <= 0 {
		opts.LookbackDelta = DefaultLookback
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	eo := promql.EngineOpts{
		Logger:               opts.Logger.With("component", "promql"),
		MaxSamples:           opts.MaxSamples,
		Timeout:              opts.Timeout,
		LookbackDelta:        opts.LookbackDelta,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		// Subqueries without a step use one minute, Prometheus' default
		// evaluation interval.
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
	}
	fo := eo
	fo.MaxSamples = min(opts.FastMaxSamples, opts.MaxSamples)
	m := newMetrics(opts.Registerer)
	return &API{q: q, ng: promql.NewEngine(eo), engineOpts: eo, partEngines: map[int]*promql.Engine{},
		fastNg:   promql.NewEngine(fo),
		heavy:    newLane("heavy", opts.MaxConcurrent, opts.MaxQueued, m),
		fastLane: newLane("fast", opts.FastConcurrent, opts.FastConcurrent, m),
		metrics:  m, opts: opts, log: opts.Logger}
}

// partEngine returns the engine for the parts of a query split n ways
// (split.go, shard.go). Its sample limit is MaxSamples/n, so that the n
// parts, whose results are all held until merged, hold no more than the
// whole query may; a part that hits it makes the whole query decide.
func (a *API) partEngine(n int) *promql.Engine {
	a.partMu.Lock()
	defer a.partMu.Unlock()
	ng, ok := a.partEngines[n]
	if !ok {
		eo := a.engineOpts
		eo.MaxSamples = max(1, eo.MaxSamples/n)
		ng = promql.NewEngine(eo)
		a.partEngines[n] = ng
	}
	return ng
}

// Register adds the /api/v1 routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	for path, h := range map[string]http.HandlerFunc{
		"/api/v1/query":               a.query,
		"/api/v1/query_range":         a.queryRange,
		"/api/v1/series":              a.series,
		"/api/v1/labels":              a.labelNames,
		"/api/v1/label/{name}/values": a.labelValues,
		"/api/v1/query_exemplars":     a.exemplars,
		"/api/v1/format_query":        a.formatQuery,
	} {
		mux.HandleFunc("GET "+path, h)
		mux.HandleFunc("POST "+path, h)
	}
	mux.HandleFunc("GET /api/v1/metadata", a.metadata)
	mux.HandleFunc("GET /api/v1/status/buildinfo", a.buildinfo)
}

// Error types and their HTTP status, as in the Prometheus API.
const (
	errBadData     = "bad_data"
	errExec        = "execution"
	errCanceled    = "canceled"
	errTimeout     = "timeout"
	errInternal    = "internal"
	errUnavailable = "unavailable"
)

// statusClientClosed is nginx's code for a client that went away; the
// Prometheus API uses it for canceled queries.
const statusClientClosed = 499

func errorStatus(typ string) int {
	switch typ {
	case errBadData:
		return http.StatusBadRequest
	case errExec:
		return http.StatusUnprocessableEntity
	case errCanceled:
		return statusClientClosed
	case errTimeout, errUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

type apiError struct {
	typ string
	err error
	// retryAfter, if set, is sent as Retry-After (a refused query).
	retryAfter time.Duration
}

func (e *apiError) Error() string { return e.err.Error() }

func badData(format string, args ...any) *apiError {
	return &apiError{typ: errBadData, err: fmt.Errorf(format, args...)}
}

func (a *API) writeError(w http.ResponseWriter, e *apiError) {
	b := append(make([]byte, 0, 128), `{"status":"error","errorType":`...)
	b = appendString(b, e.typ)
	b = append(b, `,"error":`...)
	b = appendString(b, e.err.Error())
	b = append(b, '}')
	w.Header().Set("Content-Type", "application/json")
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(e.retryAfter/time.Second)))
	}
	w.WriteHeader(errorStatus(e.typ))
	if _, err := w.Write(b); err != nil {
		a.log.Debug("write error response", "err", err)
	}
}

// writeData writes {"status":"success","data":DATA[,"warnings":..]} where
// data appends DATA.
func (a *API) writeData(w http.ResponseWriter, data func([]byte) []byte, warnings, infos []string) {
	b := append(make([]byte, 0, 4096), `{"status":"success","data":`...)
	b = data(b)
	if len(warnings) > 0 {
		b = append(b, `,"warnings":`...)
		b = appendStrings(b, warnings)
	}
	if len(infos) > 0 {
		b = append(b, `,"infos":`...)
		b = appendStrings(b, infos)
	}
	b = append(b, '}')
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(b); err != nil {
		a.log.Debug("write response", "err", err)
	}
}

// form parses query string and POST form together, as Prometheus does.
func form(r *http.Request) (func(string) string, *apiError) {
	if err := r.ParseForm(); err != nil {
		return nil, badData("error parsing form values: %w", err)
	}
	return r.Form.Get, nil
}

// queryContext applies the request's timeout parameter (bounded by the
// configured one).
func (a *API) queryContext(r *http.Request, get func(string) string) (context.Context, context.CancelFunc, *apiError) {
	timeout := a.opts.Timeout
	if s := get("timeout"); s != "" {
		d, err := ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, nil, badData("invalid parameter \"timeout\": %q", s)
		}
		timeout = min(timeout, d)
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	return ctx, cancel, nil
}

// Instant evaluates qs at ts. The caller must call the returned close
// function when done with the value.
func (a *API) Instant(ctx context.Context, qs string, ts time.Time) (*promql.Result, func(), error) {
	expr, e := a.parse(qs)
	if e != nil {
		return nil, nil, e
	}
	return a.runLanes(ctx, a.fast(expr, 0), func(ng *promql.Engine) (*promql.Result, func(), error) {
		if ng == nil {
			ng = a.ng
		}
		q, err := ng.NewInstantQuery(ctx, a.q, nil, qs, ts)
		if err != nil {
			return nil, nil, badData("invalid parameter \"query\": %w", err)
		}
		return q.Exec(ctx), q.Close, nil
	})
}

// Range evaluates qs from start to end every step. The PromQL engine
// evaluates one query on one goroutine, so long ranges are spread over the
// cores: by series where every output series comes from one input series
// (shardRange), else by runs of steps (splitRange). The caller must call
// the returned close function when done with the value.
func (a *API) Range(ctx context.Context, qs string, start, end time.Time, step time.Duration) (*promql.Result, func(), error) {
	expr, e := a.parse(qs)
	if e != nil {
		return nil, nil, e
	}
	return a.runLanes(ctx, a.fast(expr, end.Sub(start)), func(ng *promql.Engine) (*promql.Result, func(), error) {
		if ng != nil {
			q, err := ng.NewRangeQuery(ctx, a.q, nil, qs, start, end, step)
			if err != nil {
				return nil, nil, badData("invalid parameter \"query\": %w", err)
			}
			return q.Exec(ctx), q.Close, nil
		}
		cores, steps := runtime.GOMAXPROCS(0), rangeSteps(start, end, step)
		switch {
		case cores < 2 || steps < 2*minStepsPerPart:
			return a.wholeRange(ctx, qs, start, end, step)
		case seriesShardable(qs):
			return a.shardRange(ctx, qs, start, end, step, shardsPerCore*cores)
		case splittable(qs):
			return a.splitRange(ctx, qs, start, end, step, min(cores, steps/minStepsPerPart))
		}
		return a.wholeRange(ctx, qs, start, end, step)
	})
}

// wholeRange evaluates qs as one engine query.
func (a *API) wholeRange(ctx context.Context, qs string, start, end time.Time, step time.Duration) (*promql.Result, func(), error) {
	q, err := a.ng.NewRangeQuery(ctx, a.q, nil, qs, start, end, step)
	if err != nil {
		return nil, nil, badData("invalid parameter \"query\": %w", err)
	}
	return q.Exec(ctx), q.Close, nil
}

// resultError maps engine errors onto API error types.
func resultError(err error) *apiError {
	var (
		canceled promql.ErrQueryCanceled
		timeout  promql.ErrQueryTimeout
		stor     promql.ErrStorage
		ae       *apiError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &canceled), errors.Is(err, context.Canceled):
		return &apiError{typ: errCanceled, err: err}
	case errors.As(err, &timeout), errors.Is(err, context.DeadlineExceeded):
		return &apiError{typ: errTimeout, err: err}
	case errors.As(err, &stor):
		return &apiError{typ: errInternal, err: err}
	}
	return &apiError{typ: errExec, err: err}
}

// queryForm parses the form and its required "query" parameter, writing
// the error response itself when either is missing or bad.
func (a *API) queryForm(w http.ResponseWriter, r *http.Request) (get func(string) string, qs string, ok bool) {
	get, e := form(r)
	if e != nil {
		a.writeError(w, e)
		return nil, "", false
	}
	if qs = get("query"); qs == "" {
		a.writeError(w, badData("invalid parameter \"query\": no query given"))
		return nil, "", false
	}
	return get, qs, true
}

func (a *API) query(w http.ResponseWriter, r *http.Request) {
	get, qs, ok := a.queryForm(w, r)
	if !ok {
		return
	}
	ts, err := timeParam(get, "time", time.Now())
	if err != nil {
		a.writeError(w, badData("%w", err))
		return
	}
	ctx, cancel, e := a.queryContext(r, get)
	if e != nil {
		a.writeError(w, e)
		return
	}
	defer cancel()
	a.run(w, qs, func() (*promql.Result, func(), error) { return a.Instant(ctx, qs, ts) })
}

func (a *API) queryRange(w http.ResponseWriter, r *http.Request) {
	get, qs, ok := a.queryForm(w, r)
	if !ok {
		return
	}
	var start, end time.Time
	var step time.Duration
	for _, p := range []struct {
		name string
		f    func(string) error
	}{
		{"start", func(s string) (err error) { start, err = ParseTime(s); return }},
		{"end", func(s string) (err error) { end, err = ParseTime(s); return }},
		{"step", func(s string) (err error) { step, err = ParseDuration(s); return }},
	} {
		v := get(p.name)
		if v == "" {
			a.writeError(w, badData("invalid parameter %q: missing", p.name))
			return
		}
		if err := p.f(v); err != nil {
			a.writeError(w, badData("invalid parameter %q: %w", p.name, err))
			return
		}
	}
	switch {
	case end.Before(start):
		a.writeError(w, badData("invalid parameter \"end\": end timestamp must not be before start time"))
		return
	case step <= 0:
		a.writeError(w, badData("invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer"))
		return
	case end.Sub(start)/step > maxPoints:
		a.writeError(w, badData("exceeded maximum resolution of %d points per timeseries. Try decreasing the query resolution (?step=XX)", maxPoints))
		return
	}
	ctx, cancel, e := a.queryContext(r, get)
	if e != nil {
		a.writeError(w, e)
		return
	}
	defer cancel()
	a.run(w, qs, func() (*promql.Result, func(), error) { return a.Range(ctx, qs, start, end, step) })
}

func (a *API) run(w http.ResponseWriter, qs string, exec func() (*promql.Result, func(), error)) {
	res, done, err := exec()
	if err != nil {
		a.writeError(w, resultError(err))
		return
	}
	defer done()
	if res.Err != nil {
		a.writeError(w, resultError(res.Err))
		return
	}
	warnings, infos := res.Warnings.AsStrings(qs, 10, 10)
	a.writeResult(w, res.Value, warnings, infos)
}

// writeResult is writeData for a query result, written out as it is
// encoded (appendResult).
func (a *API) writeResult(w http.ResponseWriter, v parser.Value, warnings, infos []string) {
	failed := false
	flush := func(b []byte) []byte {
		if !failed {
			if _, err := w.Write(b); err != nil {
				failed = true
				a.log.Debug("write response", "err", err)
			}
		}
		return b[:0]
	}
	w.Header().Set("Content-Type", "application/json")
	b := append(make([]byte, 0, 4096), `{"status":"success","data":`...)
	b = appendResult(b, v, flush)
	if len(warnings) > 0 {
		b = append(b, `,"warnings":`...)
		b = appendStrings(b, warnings)
	}
	if len(infos) > 0 {
		b = append(b, `,"infos":`...)
		b = appendStrings(b, infos)
	}
	flush(append(b, '}'))
}

// selectors parses the match[] parameters.
func selectors(r *http.Request) ([][]*labels.Matcher, *apiError) {
	var out [][]*labels.Matcher
	for _, s := range r.Form["match[]"] {
		ms, err := parser.ParseMetricSelector(s)
		if err != nil {
			return nil, badData("invalid parameter \"match[]\": %w", err)
		}
		out = append(out, ms)
	}
	return out, nil
}

// rangeParams reads start, end and limit of the metadata endpoints.
func rangeParams(get func(string) string) (start, end time.Time, limit int, e *apiError) {
	var err error
	if start, err = timeParam(get, "start", minTime); err != nil {
		return start, end, 0, badData("%w", err)
	}
	if end, err = timeParam(get, "end", maxTime); err != nil {
		return start, end, 0, badData("%w", err)
	}
	if end.Before(start) {
		return start, end, 0, badData("invalid parameter \"end\": end timestamp must not be before start time")
	}
	if s := get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 0 {
			return start, end, 0, badData("invalid parameter \"limit\": %q is not a non-negative integer", s)
		}
	}
	return start, end, limit, nil
}

// maxSelectors bounds the match[] parameters of one request.
const maxSelectors = 1000

// metaRequest is a request of series, labels or label values, admitted to
// the heavy lane, under the query timeout and with its effective limit.
type metaRequest struct {
	ctx   context.Context
	q     storage.Querier
	sel   [][]*labels.Matcher
	limit int
	close func()
}

func (a *API) metaRequest(r *http.Request) (*metaRequest, *apiError) {
	get, e := form(r)
	if e != nil {
		return nil, e
	}
	start, end, limit, e := rangeParams(get)
	if e != nil {
		return nil, e
	}
	if len(r.Form["match[]"]) > maxSelectors {
		return nil, badData("invalid parameter \"match[]\": %d selectors, more than %d", len(r.Form["match[]"]), maxSelectors)
	}
	for _, s := range r.Form["match[]"] {
		if e := a.checkQuery(s); e != nil {
			return nil, e
		}
	}
	sel, e := selectors(r)
	if e != nil {
		return nil, e
	}
	if limit <= 0 || limit > a.opts.MaxResults {
		limit = a.opts.MaxResults
	}
	ctx, cancel, e := a.queryContext(r, get)
	if e != nil {
		return nil, e
	}
	if e := a.heavy.acquire(ctx); e != nil {
		cancel()
		return nil, e
	}
	q, err := a.q.Querier(start.UnixMilli(), end.UnixMilli())
	if err != nil {
		a.heavy.release()
		cancel()
		return nil, &apiError{typ: errInternal, err: err}
	}
	return &metaRequest{ctx: ctx, q: q, sel: sel, limit: limit, close: func() {
		q.Close()
		a.heavy.release()
		cancel()
	}}, nil
}

// ctxError is the answer to a request whose context ended.
func ctxError(ctx context.Context) *apiError {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &apiError{typ: errTimeout, err: ctx.Err()}
	}
	return &apiError{typ: errCanceled, err: ctx.Err()}
}

// storageError maps a storage failure, which may be the context's end.
func storageError(ctx context.Context, err error) *apiError {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	return resultError(promql.ErrStorage{Err: err})
}

func (a *API) series(w http.ResponseWriter, r *http.Request) {
	m, e := a.metaRequest(r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	defer m.close()
	if len(m.sel) == 0 {
		a.writeError(w, badData("no match[] parameter provided"))
		return
	}
	// One more than the limit, to know a warning is due.
	hints := &storage.SelectHints{Start: math.MinInt64, End: math.MaxInt64, Func: "series", Limit: m.limit + 1}
	sets := make([]storage.SeriesSet, 0, len(m.sel))
	for _, ms := range m.sel {
		sets = append(sets, m.q.Select(m.ctx, len(m.sel) > 1, hints, ms...))
	}
	set := storage.NewMergeSeriesSet(sets, 0, storage.ChainedSeriesMerge)
	var list []labels.Labels
	var warnings annotations.Annotations
	for set.Next() {
		if len(list) >= m.limit {
			warnings.Add(errors.New("results truncated due to limit"))
			break
		}
		// The storage may not look at the context while iterating.
		if len(list)%1024 == 0 && m.ctx.Err() != nil {
			a.writeError(w, ctxError(m.ctx))
			return
		}
		list = append(list, set.At().Labels())
	}
	if err := set.Err(); err != nil {
		a.writeError(w, storageError(m.ctx, err))
		return
	}
	warnings.Merge(set.Warnings())
	ws, infos := warnings.AsStrings("", 10, 10)
	a.writeData(w, func(b []byte) []byte {
		b = append(b, '[')
		for i, ls := range list {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLabels(b, ls)
		}
		return append(b, ']')
	}, ws, infos)
}

func (a *API) labelNames(w http.ResponseWriter, r *http.Request) {
	m, e := a.metaRequest(r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	defer m.close()
	hints := &storage.LabelHints{Limit: m.limit + 1}
	a.writeStringSet(w, m, func(ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return m.q.LabelNames(m.ctx, hints, ms...)
	})
}

func (a *API) labelValues(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" || !utf8.ValidString(name) {
		a.writeError(w, badData("invalid label name: %q", name))
		return
	}
	m, e := a.metaRequest(r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	defer m.close()
	hints := &storage.LabelHints{Limit: m.limit + 1}
	a.writeStringSet(w, m, func(ms []*labels.Matcher) ([]string, annotations.Annotations, error) {
		return m.q.LabelValues(m.ctx, name, hints, ms...)
	})
}

// writeStringSet unions the sorted answers of each selector (or of none).
func (a *API) writeStringSet(w http.ResponseWriter, m *metaRequest, get func([]*labels.Matcher) ([]string, annotations.Annotations, error)) {
	sel := m.sel
	if len(sel) == 0 {
		sel = [][]*labels.Matcher{nil}
	}
	seen := map[string]struct{}{}
	var warnings annotations.Annotations
	for _, ms := range sel {
		if m.ctx.Err() != nil {
			a.writeError(w, ctxError(m.ctx))
			return
		}
		vals, ws, err := get(ms)
		if err != nil {
			a.writeError(w, storageError(m.ctx, err))
			return
		}
		warnings.Merge(ws)
		for _, v := range vals {
			seen[v] = struct{}{}
		}
		if len(seen) > 2*m.limit {
			pruneSet(seen, m.limit+1)
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	if len(out) > m.limit {
		out = out[:m.limit]
		warnings.Add(errors.New("results truncated due to limit"))
	}
	ws, infos := warnings.AsStrings("", 10, 10)
	a.writeData(w, func(b []byte) []byte { return appendStrings(b, out) }, ws, infos)
}

// pruneSet keeps the n smallest strings of set, bounding the union of
// many selectors' answers.
func pruneSet(set map[string]struct{}, n int) {
	all := make([]string, 0, len(set))
	for v := range set {
		all = append(all, v)
	}
	slices.Sort(all)
	for _, v := range all[n:] {
		delete(set, v)
	}
}

// exemplars answers with none: Vigil stores no exemplars, but Grafana asks.
func (a *API) exemplars(w http.ResponseWriter, _ *http.Request) {
	a.writeData(w, func(b []byte) []byte { return append(b, "[]"...) }, nil, nil)
}

func (a *API) metadata(w http.ResponseWriter, r *http.Request) {
	get, e := form(r)
	if e != nil {
		a.writeError(w, e)
		return
	}
	limit, perMetric := -1, -1
	for _, p := range []struct {
		name string
		dst  *int
	}{{"limit", &limit}, {"limit_per_metric", &perMetric}} {
		if s := get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				a.writeError(w, badData("invalid parameter %q: %q is not an integer", p.name, s))
				return
			}
			*p.dst = n
		}
	}
	var md map[string]Metadata
	if a.opts.Metadata != nil {
		md = a.opts.Metadata()
	}
	names := make([]string, 0, len(md))
	metric := get("metric")
	for n := range md {
		if metric == "" || n == metric {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if limit >= 0 && len(names) > limit {
		names = names[:limit]
	}
	a.writeData(w, func(b []byte) []byte {
		b = append(b, '{')
		for i, n := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n)
			b = append(b, ':')
			if perMetric == 0 {
				b = append(b, "[]"...)
				continue
			}
			m := md[n]
			b = append(b, `[{"type":`...)
			b = appendString(b, m.Type)
			b = append(b, `,"help":`...)
			b = appendString(b, m.Help)
			b = append(b, `,"unit":`...)
			b = appendString(b, m.Unit)
			b = append(b, "}]"...)
		}
		return append(b, '}')
	}, nil, nil)
}

// PrometheusAPIVersion is the Prometheus release whose query engine and API
// we embed (library v0.307.x); clients such as Grafana pick features by the
// version buildinfo reports, so report this one and Vigil's own beside it.
const PrometheusAPIVersion = "3.7.3"

func (a *API) buildinfo(w http.ResponseWriter, _ *http.Request) {
	a.writeData(w, func(b []byte) []byte {
		b = append(b, `{"version":`...)
		b = appendString(b, PrometheusAPIVersion)
		b = append(b, `,"revision":`...)
		b = appendString(b, buildinfo.Revision)
		b = append(b, `,"branch":"","buildUser":"","buildDate":"","goVersion":`...)
		b = appendString(b, runtime.Version())
		b = append(b, `,"application":"vigil","vigilVersion":`...)
		b = appendString(b, buildinfo.Version)
		return append(b, '}')
	}, nil, nil)
}
