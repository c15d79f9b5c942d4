package query

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
)

// ErrBadQuery marks errors caused by the expression itself.
var ErrBadQuery = errors.New("bad query")

// Sample is one series of an instant vector, for in-process callers (the
// dashboard) that need no JSON.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// InstantSamples evaluates qs at ts under the API's limits. A scalar result
// gives one sample without labels; other result types are bad queries.
func (a *API) InstantSamples(ctx context.Context, qs string, ts time.Time) ([]Sample, error) {
	res, done, err := a.Instant(ctx, qs, ts)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadQuery, err)
	}
	defer done()
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		out := make([]Sample, 0, len(v))
		for _, s := range v {
			out = append(out, Sample{Labels: s.Metric.Map(), Value: s.F})
		}
		return out, nil
	case promql.Scalar:
		return []Sample{{Value: v.V}}, nil
	}
	return nil, fmt.Errorf("%w: expression must give an instant vector, got %s", ErrBadQuery, res.Value.Type())
}

// Storage returns what the API reads and how far back an instant value
// looks, for in-process readers that scan a few known series directly
// instead of evaluating PromQL (the fabric view: about 13,000 ports, where
// the engine's series selection and label matching dominate).
func (a *API) Storage() (storage.Queryable, time.Duration) { return a.q, a.opts.LookbackDelta }
