package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/treestatus"
	"github.com/vigil-hpc/vigil/internal/web"
)

// webSource feeds the dashboard from the query engine in this process.
type webSource struct {
	api *query.API
	// groups maps node names to racks or partitions (--topology); nil
	// lets the dashboard group by name pattern.
	groups map[string]string
}

// instant evaluates expr at t; expression errors wrap web.ErrBadQuery so
// the dashboard tells the user rather than retrying.
func (w webSource) instant(ctx context.Context, expr string, t time.Time) ([]treestatus.Sample, error) {
	res, err := w.api.InstantSamples(ctx, expr, t)
	if err != nil {
		if errors.Is(err, query.ErrBadQuery) {
			return nil, badQuery{err}
		}
		return nil, err
	}
	out := make([]treestatus.Sample, len(res))
	for i, s := range res {
		out[i] = treestatus.Sample{Labels: s.Labels, Value: s.Value}
	}
	return out, nil
}

// badQuery marks an error of query.ErrBadQuery as web.ErrBadQuery too,
// keeping its text, which says "bad query" already (the dashboard showed
// it twice).
type badQuery struct{ err error }

func (b badQuery) Error() string        { return b.err.Error() }
func (b badQuery) Unwrap() error        { return b.err }
func (b badQuery) Is(target error) bool { return target == web.ErrBadQuery }

// NodeValues implements web.Source.
func (w webSource) NodeValues(ctx context.Context, expr string, t time.Time) (map[string]float64, error) {
	samples, err := w.instant(ctx, expr, t)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(samples))
	for _, s := range samples {
		if n := s.Labels[store.NodeLabel]; n != "" {
			out[n] = s.Value
		}
	}
	return out, nil
}

// Nodes implements web.Source: every node with an `up` series, except the
// aggregators' own health streams.
func (w webSource) Nodes(ctx context.Context) ([]web.NodeInfo, error) {
	ups, err := w.instant(ctx, `up unless on(node) label_replace(vigil_aggregator_info, "node", "$1", "aggregator", "(.*)")`, time.Now())
	if err != nil {
		return nil, err
	}
	out := make([]web.NodeInfo, 0, len(ups))
	for _, s := range ups {
		if n := s.Labels[store.NodeLabel]; n != "" {
			out = append(out, web.NodeInfo{Name: n, Up: s.Value == 1, Group: w.groups[n]})
		}
	}
	return out, nil
}

// Tree implements web.Source; nil when no aggregator reports and no node
// is down or skewed.
func (w webSource) Tree(ctx context.Context) (any, error) {
	t, err := treestatus.Build(ctx, func(ctx context.Context, expr string) ([]treestatus.Sample, error) {
		return w.instant(ctx, expr, time.Now())
	})
	if err != nil {
		if errors.Is(err, web.ErrBadQuery) {
			return nil, err
		}
		return nil, fmt.Errorf("tree: %w", err)
	}
	if t.Aggregators == 0 && t.NodesClockSkew == 0 && t.NodesDown == 0 {
		return nil, nil
	}
	return t, nil
}
