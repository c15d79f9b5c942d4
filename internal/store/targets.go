package store

import (
	"context"
	"fmt"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

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
