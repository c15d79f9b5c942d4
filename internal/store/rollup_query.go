package store

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// Queryable returns the raw store extended into the past by the rollups,
// for the query engine. A Select reaching back before the raw data's start
// (the boundary, rounded down to a minute) reads the rollup mean of each
// series for the older part, under the series' own labels, and raw samples
// from the boundary on; queries need no rewriting. Every PromQL function
// therefore sees the means for old data: plain selection and avg_over_time
// exactly, rate and increase approximately (the mean of a counter over a
// minute is monotonic except across resets), min/max_over_time only
// within-minute-smoothed. A selector naming RollupLabel
// (node_load1{__rollup__="max"}) reads that aggregate from the rollups over
// the whole range instead, label included.
func (r *Rollup) Queryable() storage.Queryable { return rollupQueryable{r} }

type rollupQueryable struct{ r *Rollup }

// boundary is the first timestamp served from raw data: the start of the
// minute holding the oldest raw sample. Raw data is never replaced by a
// rollup where it still exists; the rollup of that first minute, stamped
// at the minute's start, is left out too, or it would stand in for the
// raw samples that follow it in the same minute (and appear before the
// first of them). The raw database loses whole blocks, whose ranges are
// multiples of a minute, so no minute is ever partly dropped: the raw
// part of the first minute is all there ever was of it.
func (r *Rollup) boundary() int64 {
	rs := r.raw.MinTime()
	if rs == math.MaxInt64 {
		// No raw data: everything rolled up comes from the rollups.
		return r.watermark.Load()
	}
	step := RollupStep.Milliseconds()
	return rs - ((rs%step)+step)%step
}

func (q rollupQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	b := q.r.boundary()
	mq := &mergedQuerier{r: q.r, mint: mint, maxt: maxt, boundary: b}
	var err error
	if maxt >= b {
		if mq.raw, err = q.r.raw.Querier(max(mint, b), maxt); err != nil {
			return nil, err
		}
	}
	if mint < b {
		if mq.old, err = q.r.db.Querier(mint, min(maxt, b-1)); err != nil {
			mq.Close()
			return nil, err
		}
	}
	return mq, nil
}

// mergedQuerier chains rollup means before boundary and raw data from it.
type mergedQuerier struct {
	r                    *Rollup
	mint, maxt, boundary int64
	raw                  storage.Querier // nil when the range ends before boundary
	old                  storage.Querier // rollups, [mint, boundary); nil when mint >= boundary
	mu                   sync.Mutex      // guards all
	all                  storage.Querier // rollups, [mint, maxt]; opened on demand
}

func (m *mergedQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	for _, mt := range ms {
		if mt.Name == RollupLabel {
			m.mu.Lock()
			if m.all == nil {
				q, err := m.r.db.Querier(m.mint, m.maxt)
				if err != nil {
					m.mu.Unlock()
					return storage.ErrSeriesSet(err)
				}
				m.all = q
			}
			all := m.all
			m.mu.Unlock()
			return all.Select(ctx, sortSeries, hints, ms...)
		}
	}
	if m.old == nil {
		return m.raw.Select(ctx, sortSeries, hints, ms...) // recent data only: no overhead
	}
	oldHints, rawHints := clipHints(hints, m.mint, m.boundary-1), clipHints(hints, m.boundary, m.maxt)
	mean := append(slices.Clip(ms), labels.MustNewMatcher(labels.MatchEqual, RollupLabel, AggMean))
	// Dropping a label every series has with the same value keeps the
	// order, so the rollup set stays sorted for the merge.
	old := dropLabelSet{m.old.Select(ctx, true, oldHints, mean...), RollupLabel}
	if m.raw == nil {
		return old
	}
	raw := m.raw.Select(ctx, true, rawHints, ms...)
	return storage.NewMergeSeriesSet([]storage.SeriesSet{old, raw}, 0, storage.ChainedSeriesMerge)
}

func clipHints(h *storage.SelectHints, mint, maxt int64) *storage.SelectHints {
	if h == nil {
		return nil
	}
	c := *h
	c.Start, c.End = max(c.Start, mint), min(c.End, maxt)
	return &c
}

func (m *mergedQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return m.labels(func(q storage.Querier) ([]string, annotations.Annotations, error) {
		return q.LabelValues(ctx, name, hints, ms...)
	})
}

func (m *mergedQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	names, ws, err := m.labels(func(q storage.Querier) ([]string, annotations.Annotations, error) {
		return q.LabelNames(ctx, hints, ms...)
	})
	return slices.DeleteFunc(names, func(s string) bool { return s == RollupLabel }), ws, err
}

// labels unites the sorted answers of the rollup and raw queriers.
func (m *mergedQuerier) labels(get func(storage.Querier) ([]string, annotations.Annotations, error)) ([]string, annotations.Annotations, error) {
	var out []string
	var ws annotations.Annotations
	for _, q := range []storage.Querier{m.old, m.raw} {
		if q == nil {
			continue
		}
		vs, w, err := get(q)
		ws.Merge(w)
		if err != nil {
			return nil, ws, err
		}
		out = append(out, vs...)
	}
	slices.Sort(out)
	return slices.Compact(out), ws, nil
}

func (m *mergedQuerier) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, q := range []storage.Querier{m.old, m.raw, m.all} {
		if q != nil {
			errs = append(errs, q.Close())
		}
	}
	return errors.Join(errs...)
}

type strippedSeries struct {
	storage.Series
	lset labels.Labels
}

func (s strippedSeries) Labels() labels.Labels { return s.lset }
