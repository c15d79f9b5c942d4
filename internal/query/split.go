package query

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"
)

// minStepsPerPart keeps short range queries whole: splitting them costs
// more than it saves (each run of steps re-reads its lookback window, and
// every part is an engine query of its own).
const minStepsPerPart = 64

func rangeSteps(start, end time.Time, step time.Duration) int {
	if step <= 0 {
		return 1
	}
	return int(end.Sub(start)/step) + 1
}

// splittable reports whether qs may be evaluated as runs of steps. Every
// step of a range query is evaluated independently of the others, so
// evaluating runs of steps separately and concatenating each series' points
// gives the same result, except for expressions whose meaning depends on
// the query's own start or end (the @ modifier with start() or end()):
// those, and anything with @, stay whole.
func splittable(qs string) bool { return !strings.Contains(qs, "@") }

// splitRange evaluates parts runs of steps concurrently and merges them into
// one matrix.
func (a *API) splitRange(ctx context.Context, qs string, start, end time.Time, step time.Duration, parts int) (*promql.Result, func(), error) {
	steps := rangeSteps(start, end, step)
	ng := a.partEngine(parts)
	ps := make([]promql.Query, parts)
	for i := range ps {
		first, last := steps*i/parts, steps*(i+1)/parts-1
		q, err := ng.NewRangeQuery(ctx, a.q, nil, qs,
			start.Add(time.Duration(first)*step), start.Add(time.Duration(last)*step), step)
		if err != nil {
			closeParts(ps)
			return nil, nil, badData("invalid parameter \"query\": %w", err)
		}
		ps[i] = q
	}
	// The merged points are copies, so the parts can go back now.
	defer closeParts(ps)
	mats, warnings, err := a.execParts(ctx, ps)
	if errors.As(err, new(promql.ErrTooManySamples)) {
		return a.wholeRange(ctx, qs, start, end, step)
	}
	if err != nil {
		return &promql.Result{Err: err, Warnings: warnings}, func() {}, nil
	}

	index := map[uint64][]int{} // labels hash -> positions in merged
	var merged promql.Matrix
	for _, m := range mats {
		for _, s := range m {
			h := s.Metric.Hash()
			pos := -1
			for _, j := range index[h] {
				if labels.Equal(merged[j].Metric, s.Metric) {
					pos = j
					break
				}
			}
			if pos < 0 {
				pos = len(merged)
				index[h] = append(index[h], pos)
				merged = append(merged, promql.Series{Metric: s.Metric, DropName: s.DropName})
			}
			merged[pos].Floats = append(merged[pos].Floats, s.Floats...)
			merged[pos].Histograms = append(merged[pos].Histograms, s.Histograms...)
		}
	}
	slices.SortFunc(merged, func(x, y promql.Series) int { return labels.Compare(x.Metric, y.Metric) })
	return &promql.Result{Value: merged, Warnings: warnings}, func() {}, nil
}

// execParts executes the parts of a split query on at most GOMAXPROCS
// goroutines, a goroutine taking the next part when done with one, and
// returns their matrices. The parts run under one deadline, the query
// timeout, as the whole query would. The first part to fail cancels the
// rest, and its error is returned.
func (a *API) execParts(ctx context.Context, ps []promql.Query) ([]promql.Matrix, annotations.Annotations, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		warnings annotations.Annotations
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	mats := make([]promql.Matrix, len(ps))
	for range min(len(ps), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(ps); i = int(next.Add(1) - 1) {
				// A part that starts after a failure returns at once.
				res := ps[i].Exec(ctx)
				mu.Lock()
				warnings.Merge(res.Warnings)
				if res.Err == nil {
					mats[i], res.Err = res.Matrix()
				}
				if res.Err != nil && firstErr == nil {
					firstErr = res.Err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return mats, warnings, firstErr
}

func closeParts(ps []promql.Query) {
	for _, q := range ps {
		if q != nil {
			q.Close()
		}
	}
}
