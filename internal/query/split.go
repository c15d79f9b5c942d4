package query

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// minStepsPerPart keeps short range queries whole: splitting them costs
// more (each part re-reads its lookback window) than it saves.
const minStepsPerPart = 64

// rangeParts decides into how many runs of steps a range query is split.
// Every step of a range query is evaluated independently of the others, so
// evaluating runs of steps separately and concatenating each series' points
// gives the same result, except for expressions whose meaning depends on
// the query's own start or end (the @ modifier with start() or end()):
// those, and anything with @, stay whole.
func (a *API) rangeParts(qs string, start, end time.Time, step time.Duration) int {
	if step <= 0 || strings.Contains(qs, "@") {
		return 1
	}
	steps := int(end.Sub(start)/step) + 1
	return max(1, min(runtime.GOMAXPROCS(0), steps/minStepsPerPart))
}

// splitRange evaluates parts runs of steps concurrently and merges them into
// one matrix. Each part is its own engine query (so MaxSamples applies per
// part); all of them count as one query against MaxConcurrent.
func (a *API) splitRange(ctx context.Context, qs string, start, end time.Time, step time.Duration, parts int) (*promql.Result, error) {
	steps := int(end.Sub(start)/step) + 1
	type part struct {
		q   promql.Query
		res *promql.Result
	}
	ps := make([]part, parts)
	for i := range ps {
		first, last := steps*i/parts, steps*(i+1)/parts-1
		q, err := a.ng.NewRangeQuery(ctx, a.q, nil, qs,
			start.Add(time.Duration(first)*step), start.Add(time.Duration(last)*step), step)
		if err != nil {
			for _, p := range ps[:i] {
				p.q.Close()
			}
			return nil, badData("invalid parameter \"query\": %w", err)
		}
		ps[i].q = q
	}
	defer func() {
		for _, p := range ps {
			p.q.Close()
		}
	}()
	var wg sync.WaitGroup
	for i := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ps[i].res = ps[i].q.Exec(ctx)
		}()
	}
	wg.Wait()

	out := &promql.Result{}
	index := map[uint64][]int{} // labels hash -> positions in merged
	var merged promql.Matrix
	for _, p := range ps {
		out.Warnings.Merge(p.res.Warnings)
		if p.res.Err != nil {
			out.Err = p.res.Err
			return out, nil
		}
		m, err := p.res.Matrix()
		if err != nil {
			out.Err = err
			return out, nil
		}
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
				// Copy: the part's point slices go back to the engine's pool on Close.
				merged = append(merged, promql.Series{Metric: s.Metric, DropName: s.DropName})
			}
			merged[pos].Floats = append(merged[pos].Floats, s.Floats...)
			merged[pos].Histograms = append(merged[pos].Histograms, s.Histograms...)
		}
	}
	slices.SortFunc(merged, func(x, y promql.Series) int { return labels.Compare(x.Metric, y.Metric) })
	out.Value = merged
	return out, nil
}
