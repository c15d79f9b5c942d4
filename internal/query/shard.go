package query

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// shardsPerCore sets how many series shards a range query is dealt into
// per core. More shards than cores rebalance when another process holds a
// core for a while (a free core takes the next shard); sharing one Select
// keeps each extra shard cheap. On 2 cores 1, 2 and 4 shards a core were
// within noise of each other (docs/benchmarks.md); more shards also mean a
// smaller sample limit per shard (partEngine).
const shardsPerCore = 2

// perSeries reports whether each output series of the function derives
// from exactly one input series, with no look at other series. Functions
// not listed (absent, scalar, vector, sort*, histogram_quantile and
// histogram_fraction over classic buckets, info, and any added later) keep
// a query whole.
func perSeries(fn string) bool {
	switch fn {
	case "rate", "irate", "increase", "delta", "idelta", "deriv", "predict_linear", "resets", "changes",
		"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
		"quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time",
		"present_over_time", "mad_over_time", "double_exponential_smoothing",
		"abs", "ceil", "floor", "round", "exp", "ln", "log2", "log10", "sqrt", "sgn",
		"clamp", "clamp_min", "clamp_max", "acos", "acosh", "asin", "asinh", "atan", "atanh",
		"cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad", "timestamp", "label_replace", "label_join",
		"histogram_count", "histogram_sum", "histogram_avg", "histogram_stddev", "histogram_stdvar",
		"days_in_month", "day_of_month", "day_of_week", "day_of_year", "hour", "minute", "month", "year",
		"time", "pi":
		return true
	}
	return false
}

// seriesShardable reports whether qs may be evaluated on disjoint subsets of
// its series with the results concatenated: an instant-vector expression
// with exactly one selector, built only from per-series functions,
// subqueries, and arithmetic or comparison with scalars. Each output series
// then derives from one input series, so the union over the shards is the
// whole result. Two inputs that map to one output labelset are an error in
// the whole query; shardRange checks for that across shards.
func seriesShardable(qs string) bool {
	expr, err := parser.ParseExpr(qs)
	if err != nil || expr.Type() != parser.ValueTypeVector {
		return false
	}
	selectors, ok := 0, true
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			selectors++
		case *parser.Call:
			ok = ok && perSeries(n.Func.Name)
		case *parser.BinaryExpr:
			// Vector-vector operators match series with each other.
			ok = ok && (n.LHS.Type() == parser.ValueTypeScalar || n.RHS.Type() == parser.ValueTypeScalar)
		case *parser.AggregateExpr:
			ok = false
		case nil, // Walk's end of a node's children
			*parser.MatrixSelector, *parser.SubqueryExpr, *parser.ParenExpr, *parser.UnaryExpr,
			*parser.NumberLiteral, *parser.StringLiteral, parser.Expressions:
		default:
			ok = false
		}
		return nil
	})
	return ok && selectors == 1
}

// shardRange evaluates qs as n engine queries over disjoint shards of its
// series (see seriesShardable) and concatenates their results. The shards
// share one storage Select per selector (sharedSelect), so no sample is
// decoded twice and no part re-reads a lookback window, and having more
// shards than cores costs little. The merged matrix holds the shard
// queries' point slices rather than copies; the returned function releases
// them.
func (a *API) shardRange(ctx context.Context, qs string, start, end time.Time, step time.Duration, n int) (*promql.Result, func(), error) {
	ss := newSharedSelect(a.q, n)
	defer ss.close()
	ng := a.partEngine(n)
	ps := make([]promql.Query, n)
	for i := range ps {
		q, err := ng.NewRangeQuery(ctx, ss.shard(i), nil, qs, start, end, step)
		if err != nil {
			closeParts(ps)
			return nil, nil, badData("invalid parameter \"query\": %w", err)
		}
		ps[i] = q
	}
	mats, warnings, err := a.execParts(ctx, ps)
	if err != nil {
		closeParts(ps)
		if errors.As(err, new(promql.ErrTooManySamples)) {
			return a.wholeRange(ctx, qs, start, end, step)
		}
		return &promql.Result{Err: err, Warnings: warnings}, func() {}, nil
	}
	total := 0
	for _, m := range mats {
		total += len(m)
	}
	merged := make(promql.Matrix, 0, total)
	for _, m := range mats {
		merged = append(merged, m...)
	}
	slices.SortFunc(merged, func(x, y promql.Series) int { return labels.Compare(x.Metric, y.Metric) })
	for i := 1; i < len(merged); i++ {
		if labels.Equal(merged[i-1].Metric, merged[i].Metric) {
			// Two shards made the same labelset (label_replace, say): the
			// whole query fails on that, so let it say how.
			closeParts(ps)
			return a.wholeRange(ctx, qs, start, end, step)
		}
	}
	return &promql.Result{Value: merged, Warnings: warnings}, func() { closeParts(ps) }, nil
}

// sharedSelect serves the engine queries of the shards of one expression.
// The first shard to make a Select call runs it against the storage and
// deals the series into the shards by a hash of their labels without the
// metric name (so series that differ only in name, which collide once a
// function drops it, land in the same shard and fail there early); every
// shard gets back its own deal. Calls are keyed by all their arguments, so
// differing calls are never mixed up.
type sharedSelect struct {
	q  storage.Queryable
	n  int
	mu sync.Mutex
	// queriers are the storage queriers by [mint, maxt]; close closes them.
	queriers map[[2]int64]storage.Querier
	calls    map[string]*sharedCall
}

type sharedCall struct {
	once     sync.Once
	shards   [][]storage.Series
	warnings annotations.Annotations
	err      error
}

func newSharedSelect(q storage.Queryable, n int) *sharedSelect {
	return &sharedSelect{q: q, n: n, queriers: map[[2]int64]storage.Querier{}, calls: map[string]*sharedCall{}}
}

// shard returns the Queryable of shard i.
func (s *sharedSelect) shard(i int) storage.Queryable {
	return storage.QueryableFunc(func(mint, maxt int64) (storage.Querier, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		q, ok := s.queriers[[2]int64{mint, maxt}]
		if !ok {
			var err error
			if q, err = s.q.Querier(mint, maxt); err != nil {
				return nil, err
			}
			s.queriers[[2]int64{mint, maxt}] = q
		}
		return &shardQuerier{Querier: q, s: s, i: i, mint: mint, maxt: maxt}, nil
	})
}

// close closes the storage queriers. The shards' results hold no
// references into the storage, so this may precede their use.
func (s *sharedSelect) close() {
	for _, q := range s.queriers {
		q.Close()
	}
}

// shardQuerier answers Select from the shared deal and passes label
// lookups to the storage querier. Its Close leaves the storage querier to
// sharedSelect.close.
type shardQuerier struct {
	storage.Querier
	s          *sharedSelect
	i          int
	mint, maxt int64
}

func (q *shardQuerier) Close() error { return nil }

func (q *shardQuerier) Select(ctx context.Context, sorted bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	var key strings.Builder
	fmt.Fprintf(&key, "%d %d %t", q.mint, q.maxt, sorted)
	if hints != nil {
		fmt.Fprintf(&key, " %+v", *hints)
	}
	for _, m := range ms {
		key.WriteString(" " + m.String())
	}
	q.s.mu.Lock()
	c, ok := q.s.calls[key.String()]
	if !ok {
		c = &sharedCall{}
		q.s.calls[key.String()] = c
	}
	q.s.mu.Unlock()
	c.once.Do(func() {
		set := q.Querier.Select(ctx, sorted, hints, ms...)
		c.shards = make([][]storage.Series, q.s.n)
		var buf []byte
		for set.Next() {
			s := set.At()
			var h uint64
			h, buf = s.Labels().HashWithoutLabels(buf)
			// The order within a shard stays the storage's, sorted if asked.
			c.shards[h%uint64(q.s.n)] = append(c.shards[h%uint64(q.s.n)], s)
		}
		c.warnings, c.err = set.Warnings(), set.Err()
	})
	if c.err != nil {
		return storage.ErrSeriesSet(c.err)
	}
	// A copy each: the engine may add to the warnings it is given.
	return &sliceSeriesSet{series: c.shards[q.i], warnings: maps.Clone(c.warnings), i: -1}
}

// sliceSeriesSet iterates series already selected.
type sliceSeriesSet struct {
	series   []storage.Series
	warnings annotations.Annotations
	i        int
}

func (s *sliceSeriesSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *sliceSeriesSet) At() storage.Series                { return s.series[s.i] }
func (s *sliceSeriesSet) Err() error                        { return nil }
func (s *sliceSeriesSet) Warnings() annotations.Annotations { return s.warnings }
