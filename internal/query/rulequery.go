package query

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// RuleInstant evaluates a rule's expression at t for the rules engine
// (package alerting), as rules.QueryFunc: under the same bounds as the API's
// queries (length, nesting, samples, timeout) but outside the lanes, since
// a rule must wait for its turn rather than be refused like a dashboard
// query; the caller bounds how many run at once. Scalars become one sample
// without labels, as in Prometheus.
func (a *API) RuleInstant(ctx context.Context, qs string, t time.Time) (promql.Vector, error) {
	if e := a.checkQuery(qs); e != nil { // the engine parses it next
		return nil, e
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	q, err := a.ng.NewInstantQuery(ctx, a.q, nil, qs, t)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		// Copied: the result belongs to the query, closed on return.
		return append(promql.Vector(nil), v...), nil
	case promql.Scalar:
		return promql.Vector{{T: v.T, F: v.V, Metric: labels.EmptyLabels()}}, nil
	}
	return nil, errors.New("rule result is not a vector or scalar")
}
