package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
)

// wholeResult is qs evaluated as one engine query: its matrix (copied) as
// text, or its error.
func wholeResult(t *testing.T, a *API, qs string, start, end time.Time, step time.Duration) (string, error) {
	t.Helper()
	q, err := a.ng.NewRangeQuery(context.Background(), a.q, nil, qs, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		return "", res.Err
	}
	m, err := res.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	return copyMatrix(m).String(), nil
}

// A range query sharded by series gives exactly the whole query's result,
// or its error, for any number of shards.
func TestShardRangeMatchesWhole(t *testing.T) {
	a := New(counters(t), Options{})
	start, end := base.Add(2*time.Minute), base.Add(time.Hour)
	for _, qs := range []string{
		`node_context_switches_total`,
		`rate(node_context_switches_total[1m])`,
		`increase(node_context_switches_total[5m]) > 30000`,
		`max_over_time(rate(node_context_switches_total[1m])[10m:30s])`,
		`-node_context_switches_total * 2 + time()`,
		`timestamp(node_context_switches_total @ end())`,
		`rate(node_context_switches_total[1m] offset 10m)`,
		`label_replace(rate(node_context_switches_total[1m]), "rack", "r$1", "node", "cn0(.)")`,
		`{__name__=~"node_context_switches_total|node_intr_total", node=~"cn1.*"}`,
		// Errors: the two names collide once rate drops them (within a
		// shard), and label_replace makes all series one (across shards).
		`rate({__name__=~"node_context_switches_total|node_intr_total"}[1m])`,
		`label_replace(node_context_switches_total, "node", "x", "", "")`,
		`label_replace(node_context_switches_total{node=~"cn0[12]"}, "node", "x", "", "")`,
		`node_no_such_metric`,
	} {
		if !seriesShardable(qs) {
			t.Errorf("%s: not shardable", qs)
			continue
		}
		want, wantErr := wholeResult(t, a, qs, start, end, 15*time.Second)
		for _, n := range []int{2, 3, 8, 32} {
			res, done, err := a.shardRange(context.Background(), qs, start, end, 15*time.Second, n)
			if err != nil {
				t.Fatalf("%s: %v", qs, err)
			}
			switch {
			case wantErr != nil || res.Err != nil:
				if wantErr == nil || res.Err == nil || res.Err.Error() != wantErr.Error() {
					t.Errorf("%s in %d shards: error %v, want %v", qs, n, res.Err, wantErr)
				}
			default:
				if got := res.Value.(promql.Matrix).String(); got != want {
					t.Errorf("%s in %d shards differs from the whole query:\n got %.300s\nwant %.300s", qs, n, got, want)
				}
			}
			done()
		}
	}
}

func TestSeriesShardable(t *testing.T) {
	for qs, want := range map[string]bool{
		`x`:                                    true,
		`rate(x{a="b"}[5m]) * 8 > bool 100`:    true,
		`max_over_time(deriv(x[5m])[1h:1m])`:   true,
		`clamp_max(x, 5) + time()`:             true,
		`x @ start()`:                          true,
		`sum(rate(x[5m]))`:                     false, // aggregation across series
		`topk(3, x)`:                           false,
		`x / y`:                                false, // vector matching
		`x * on() group_left vector(1)`:        false,
		`x - x offset 1h`:                      false,
		`x * scalar(y)`:                        false, // a second selector
		`absent(x)`:                            false, // answers for no series
		`histogram_quantile(0.9, rate(x[5m]))`: false, // classic buckets are series
		`sort_desc(x)`:                         false,
		`vector(1)`:                            false, // no selector
		`x[5m]`:                                false, // not an instant vector
		`rate(x[5m]`:                           false, // syntax error
	} {
		if got := seriesShardable(qs); got != want {
			t.Errorf("seriesShardable(%s) = %t, want %t", qs, got, want)
		}
	}
}

// MaxSamples bounds a sharded query as a whole: shards that together hold
// more than the limit fail it, and a query within the limit gives its
// result even when one shard gets more than its share.
func TestShardRangeMaxSamples(t *testing.T) {
	s := counters(t)
	const qs = `node_context_switches_total`
	start, end := base.Add(2*time.Minute), base.Add(time.Hour)
	// 20 series of 233 steps, less 13 steps in one node's gap: 4647
	// points, the whole query's peak.
	for _, tc := range []struct {
		limit   int
		wantErr bool
	}{{4646, true}, {4647, false}} {
		a := New(s, Options{MaxSamples: tc.limit})
		want, wantErr := wholeResult(t, a, qs, start, end, 15*time.Second)
		if (wantErr != nil) != tc.wantErr {
			t.Fatalf("limit %d: whole query error %v, want error %t", tc.limit, wantErr, tc.wantErr)
		}
		// Seven shards of 20 series: one holds at least three, more than a
		// seventh of the limit.
		res, done, err := a.shardRange(context.Background(), qs, start, end, 15*time.Second, 7)
		if err != nil {
			t.Fatal(err)
		}
		if tc.wantErr {
			if res.Err == nil || !strings.Contains(res.Err.Error(), "too many samples") {
				t.Errorf("limit %d: error %v, want too many samples", tc.limit, res.Err)
			}
		} else if res.Err != nil || res.Value.(promql.Matrix).String() != want {
			t.Errorf("limit %d: error %v or a result other than the whole query's", tc.limit, res.Err)
		}
		done()
	}
}

// A sharded query that runs out of time fails as a timeout.
func TestShardRangeTimeout(t *testing.T) {
	a := New(counters(t), Options{Timeout: time.Nanosecond})
	res, done, err := a.shardRange(context.Background(), `rate(node_context_switches_total[1m])`, base, base.Add(time.Hour), 15*time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, ok := res.Err.(promql.ErrQueryTimeout); !ok {
		t.Errorf("error %T %v, want a query timeout", res.Err, res.Err)
	}
}

// Range spreads long queries over the cores and gives the whole query's
// result, and its close function frees the query slot.
func TestRangeMatchesWhole(t *testing.T) {
	a := New(counters(t), Options{MaxConcurrent: 1})
	start, end := base.Add(2*time.Minute), base.Add(time.Hour)
	for _, qs := range []string{
		`rate(node_context_switches_total[1m])`,      // by series
		`sum(rate(node_context_switches_total[1m]))`, // by steps
		`node_context_switches_total @ start()`,      // by series
		`sum(node_context_switches_total @ start())`, // whole
	} {
		want, wantErr := wholeResult(t, a, qs, start, end, 15*time.Second)
		if wantErr != nil {
			t.Fatal(wantErr)
		}
		res, done, err := a.Range(context.Background(), qs, start, end, 15*time.Second)
		if err != nil || res.Err != nil {
			t.Fatalf("%s: %v %v", qs, err, res.Err)
		}
		if got := res.Value.(promql.Matrix).String(); got != want {
			t.Errorf("%s: Range differs from the whole query:\n got %.300s\nwant %.300s", qs, got, want)
		}
		done()
		if len(a.heavy.slots) != 0 || len(a.fastLane.slots) != 0 {
			t.Fatalf("%s: query slot still taken after close", qs)
		}
	}
}
