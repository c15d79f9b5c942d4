package query

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Defaults of the query limits (Options fields left zero).
const (
	// DefaultMaxQueryLength bounds the text of one expression. Dashboards'
	// queries are a few hundred bytes; the bound keeps the parser, whose
	// cost grows with the square of the nesting, from being a CPU sink.
	DefaultMaxQueryLength = 32 << 10
	// DefaultMaxQueryDepth bounds the nesting of brackets in an expression.
	DefaultMaxQueryDepth = 100
	// maxQueryOperators bounds the binary operators of an expression: a
	// chain of them nests in the syntax tree as brackets do, and costs the
	// parser as much (1,000 parse in about 10 ms, 16,000 in 2 s).
	maxQueryOperators = 1000
	// DefaultMaxResults bounds /api/v1/series, labels and label values
	// when the request gives no smaller limit.
	DefaultMaxResults = 100_000
	// DefaultFastMaxSamples bounds a query of the fast lane; one that
	// needs more is evaluated again in the heavy lane.
	DefaultFastMaxSamples = 1_000_000
	// DefaultFastSpan is the widest span of data a fast-lane query may
	// read: its range plus its longest selector window.
	DefaultFastSpan = 15 * time.Minute
	// retryAfter is what a refused client is told to wait.
	retryAfter = 5 * time.Second
)

// checkQuery bounds an expression before the parser sees it: its length,
// its bracket nesting and its count of binary operators. It skips string
// literals and comments; it over-counts operators inside numbers (1e-3)
// and matchers (!=), which only makes the bound a little stricter.
func (a *API) checkQuery(qs string) *apiError {
	if len(qs) > a.opts.MaxQueryLength {
		a.metrics.refused.WithLabelValues("too_long").Inc()
		return badData("invalid parameter \"query\": %d bytes, more than the %d allowed (query_max_length)", len(qs), a.opts.MaxQueryLength)
	}
	depth, ops, prevOp := 0, 0, false
	for i := 0; i < len(qs); i++ {
		c := qs[i]
		isOp := false
		switch c {
		case '"', '\'', '`':
			// Skip to the closing quote; backquoted strings have no escapes.
			for i++; i < len(qs) && qs[i] != c; i++ {
				if qs[i] == '\\' && c != '`' {
					i++
				}
			}
		case '#':
			for i < len(qs) && qs[i] != '\n' {
				i++
			}
		case '(', '[', '{':
			if depth++; depth > a.opts.MaxQueryDepth {
				a.metrics.refused.WithLabelValues("too_deep").Inc()
				return badData("invalid parameter \"query\": brackets nested more than %d deep", a.opts.MaxQueryDepth)
			}
		case ')', ']', '}':
			depth--
		case '+', '-', '*', '/', '%', '^', '=', '!', '<', '>':
			isOp = true
		case 'a', 'o', 'u', 'A', 'O', 'U': // and, or, unless (set operators)
			if w := wordAt(qs, i); w == "and" || w == "or" || w == "unless" {
				isOp = true
			}
		}
		if isOp && !prevOp {
			if ops++; ops > maxQueryOperators {
				a.metrics.refused.WithLabelValues("too_complex").Inc()
				return badData("invalid parameter \"query\": more than %d operators", maxQueryOperators)
			}
		}
		prevOp = isOp
	}
	return nil
}

// wordAt returns the identifier starting at qs[i] if it starts there (is
// not the tail of a longer one), lower-cased for the set operators.
func wordAt(qs string, i int) string {
	if i > 0 && identByte(qs[i-1]) {
		return ""
	}
	j := i
	for j < len(qs) && identByte(qs[j]) {
		j++
	}
	w := qs[i:j]
	if len(w) > 6 {
		return ""
	}
	b := []byte(w)
	for k, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[k] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func identByte(c byte) bool {
	return c == '_' || c == ':' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// parse checks and parses qs.
func (a *API) parse(qs string) (parser.Expr, *apiError) {
	if e := a.checkQuery(qs); e != nil {
		return nil, e
	}
	expr, err := parser.ParseExpr(qs)
	if err != nil {
		return nil, badData("invalid parameter \"query\": %w", err)
	}
	return expr, nil
}

// fast reports whether a query over rng (0 for an instant query) belongs
// in the fast lane: the data it reads spans at most FastSpan. The span of
// a selector is its range (or the lookback delta) plus the ranges of the
// subqueries around it.
func (a *API) fast(expr parser.Expr, rng time.Duration) bool {
	longest := time.Duration(0)
	parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
		if _, ok := node.(*parser.VectorSelector); !ok {
			return nil
		}
		w := a.opts.LookbackDelta
		for _, p := range path {
			switch n := p.(type) {
			case *parser.MatrixSelector:
				w = n.Range
			case *parser.SubqueryExpr:
				w += n.Range
			}
		}
		longest = max(longest, w)
		return nil
	})
	return rng+longest <= a.opts.FastSpan
}

// lane admits queries: Concurrent run at once, at most Queued more wait
// for a slot, and anything beyond is refused at once with a Retry-After,
// so a burst of queries neither holds memory in waiting goroutines nor
// waits out its timeout to fail.
type lane struct {
	name    string
	slots   chan struct{}
	waiting atomic.Int64
	queued  int64
	m       *metrics
}

func newLane(name string, concurrent, queued int, m *metrics) *lane {
	return &lane{name: name, slots: make(chan struct{}, concurrent), queued: int64(queued), m: m}
}

func (l *lane) acquire(ctx context.Context) *apiError {
	select {
	case l.slots <- struct{}{}:
		l.m.running.WithLabelValues(l.name).Inc()
		return nil
	default:
	}
	if l.waiting.Add(1) > l.queued {
		l.waiting.Add(-1)
		l.m.refused.WithLabelValues(l.name + "_queue_full").Inc()
		return &apiError{typ: errUnavailable, retryAfter: retryAfter,
			err: fmt.Errorf("too many %s queries: %d running and %d waiting; retry later", l.name, cap(l.slots), l.queued)}
	}
	defer l.waiting.Add(-1)
	select {
	case l.slots <- struct{}{}:
		l.m.running.WithLabelValues(l.name).Inc()
		return nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &apiError{typ: errTimeout, retryAfter: retryAfter, err: fmt.Errorf("query timed out waiting for a free %s query slot", l.name)}
		}
		return &apiError{typ: errCanceled, err: ctx.Err()}
	}
}

func (l *lane) release() {
	<-l.slots
	l.m.running.WithLabelValues(l.name).Dec()
}

// metrics are the query layer's self-metrics.
type metrics struct {
	refused *prometheus.CounterVec
	running *prometheus.GaugeVec
	retried prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_query_refused_total",
			Help: "Queries refused before evaluation, by reason: too_long, too_deep, too_complex, <lane>_queue_full.",
		}, []string{"reason"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_query_running",
			Help: "Queries being evaluated, by lane (fast or heavy).",
		}, []string{"lane"}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_query_fast_lane_overflows_total",
			Help: "Fast-lane queries that exceeded the fast lane's sample limit and ran again in the heavy lane.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.refused, m.running, m.retried)
	}
	return m
}

// runLanes evaluates a query in the fast lane when isFast, falling back to
// the heavy lane when it needs more samples than the fast lane allows;
// otherwise in the heavy lane. run evaluates with the given engine (nil:
// the heavy lane's own strategy).
func (a *API) runLanes(ctx context.Context, isFast bool, run func(ng *promql.Engine) (*promql.Result, func(), error)) (*promql.Result, func(), error) {
	if isFast {
		if e := a.fastLane.acquire(ctx); e != nil {
			return nil, nil, e
		}
		res, done, err := run(a.fastNg)
		switch {
		case err != nil:
			a.fastLane.release()
			return nil, nil, err
		case !errors.As(res.Err, new(promql.ErrTooManySamples)):
			return res, func() { done(); a.fastLane.release() }, nil
		}
		done()
		a.fastLane.release()
		a.metrics.retried.Inc()
	}
	if e := a.heavy.acquire(ctx); e != nil {
		return nil, nil, e
	}
	res, done, err := run(nil)
	if err != nil {
		a.heavy.release()
		return nil, nil, err
	}
	return res, func() { done(); a.heavy.release() }, nil
}
