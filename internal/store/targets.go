package store

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// seriesLabels is the label set AppendTick and SetUp give node's series d:
// the target labels job=Options.Job and instance=node (when Job is set),
// node=node and d's labels, collisions resolved by metric.SeriesLabels.
// It runs once per (node, descriptor); the result is cached.
func (s *Store) seriesLabels(node string, d *metric.Desc) (labels.Labels, error) {
	if d == nil || d.Name == "" {
		return labels.EmptyLabels(), fmt.Errorf("store: node %q: descriptor without a metric name", node)
	}
	ls, ok := metric.SeriesLabels(make([]metric.Label, 0, len(d.Labels)+4), s.opts.Job, node, d)
	if !ok {
		return labels.EmptyLabels(), fmt.Errorf("store: node %q: metric %s: a label name is empty or %q", node, d.Name, labels.MetricName)
	}
	var b labels.ScratchBuilder
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	b.Sort()
	lset := b.Labels()
	if dup, ok := lset.HasDuplicateLabelNames(); ok {
		return labels.EmptyLabels(), fmt.Errorf("store: node %q: metric %s: duplicate label %q", node, d.Name, dup)
	}
	return lset, nil
}

// nodeSeries selects every series AppendTick and SetUp wrote for node: by
// the node label, and by instance those whose node label is a plugin's own
// (NUMA series, see metric.SeriesLabels).
func (s *Store) nodeSeries(ctx context.Context, q storage.Querier, node string) storage.SeriesSet {
	byNode := q.Select(ctx, true, nil, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, node))
	if s.opts.Job == "" {
		return byNode
	}
	byInstance := q.Select(ctx, true, nil,
		labels.MustNewMatcher(labels.MatchEqual, metric.InstanceLabel, node),
		labels.MustNewMatcher(labels.MatchEqual, metric.JobLabel, s.opts.Job),
		labels.MustNewMatcher(labels.MatchNotEqual, NodeLabel, node))
	return storage.NewMergeSeriesSet([]storage.SeriesSet{byNode, byInstance}, 0, storage.ChainedSeriesMerge)
}

// targetsFile marks a data directory whose node series carry job and
// instance; its absence with data present means an older Vigil wrote it.
const targetsFile = "vigil-target-labels"

// retireUntargeted ends, with a stale marker at now, the recent series
// that an older Vigil wrote for its nodes without job and instance. The
// nodes' next ticks start new series with them; without the marker an
// instant query by node would see both for PromQL's five-minute lookback
// and sum by (node) would count the node twice. Older data keeps its
// labels. It runs at the first Open with a job (then targetsFile is
// written) and reads only the last five minutes.
func (s *Store) retireUntargeted(now time.Time) (int, error) {
	if s.opts.Job == "" {
		return 0, nil
	}
	mark := filepath.Join(s.opts.Dir, targetsFile)
	if _, err := os.Stat(mark); err == nil {
		return 0, nil
	}
	n, err := s.markUntargetedStale(now)
	if err != nil {
		return n, err
	}
	if err := os.WriteFile(mark, []byte("job and instance on node series\n"), 0o666); err != nil {
		return n, fmt.Errorf("store: %w", err)
	}
	return n, nil
}

func (s *Store) markUntargetedStale(now time.Time) (int, error) {
	ctx := context.Background()
	ts := now.UnixMilli()
	app, g, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	q, err := g.db.Querier(ts-staleLookback.Milliseconds(), ts)
	if err != nil {
		s.rollback(app, g)
		return 0, fmt.Errorf("store: retire series without target labels: %w", err)
	}
	defer q.Close()
	set := q.Select(ctx, false, nil, labels.MustNewMatcher(labels.MatchRegexp, NodeLabel, ".+"),
		labels.MustNewMatcher(labels.MatchEqual, metric.InstanceLabel, ""), labels.MustNewMatcher(labels.MatchEqual, metric.JobLabel, ""))
	var it chunkenc.Iterator
	n := 0
	for set.Next() {
		series := set.At()
		it = series.Iterator(it)
		lastT, lastV, seen := int64(0), 0.0, false
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			lastT, lastV, seen = it.AtT(), 0, true
			if vt == chunkenc.ValFloat {
				_, lastV = it.At()
			}
		}
		if err := it.Err(); err != nil {
			s.rollback(app, g)
			return 0, fmt.Errorf("store: retire %s: %w", series.Labels(), err)
		}
		if !seen || lastT >= ts || value.IsStaleNaN(lastV) {
			continue
		}
		if _, err := app.Append(0, series.Labels(), ts, math.Float64frombits(value.StaleNaN)); err != nil && !sampleRejected(err) {
			s.rollback(app, g)
			return 0, fmt.Errorf("store: retire %s: %w", series.Labels(), err)
		}
		n++
	}
	if err := set.Err(); err != nil {
		s.rollback(app, g)
		return 0, fmt.Errorf("store: retire series without target labels: %w", err)
	}
	return n, s.commit(app, g)
}
