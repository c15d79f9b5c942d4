package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

// counters stores an hour of two 1 Hz counters of 20 nodes, with a gap in
// one node's data. The second counter has the same label sets as the
// first apart from the name.
func counters(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctrs := []*metric.Desc{
		metric.NewDesc("node_context_switches_total", "x", metric.Counter),
		metric.NewDesc("node_intr_total", "x", metric.Counter),
	}
	r := rand.New(rand.NewPCG(1, 2))
	vals := map[string][]float64{}
	for i := range 3600 {
		ts := base.Add(time.Duration(i) * time.Second)
		for n := range 20 {
			node := fmt.Sprintf("cn%02d", n)
			if n == 3 && i > 1000 && i < 1500 {
				continue
			}
			if vals[node] == nil {
				vals[node] = make([]float64, len(ctrs))
			}
			for j := range ctrs {
				vals[node][j] += float64(r.IntN(1000))
			}
			if err := s.AppendTick(node, ts, ctrs, vals[node], false); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

// A range query split over cores gives exactly the whole query's result.
func TestSplitRangeMatchesWhole(t *testing.T) {
	s := counters(t)
	a := New(s, Options{})
	start, end := base.Add(2*time.Minute), base.Add(time.Hour)
	for _, qs := range []string{
		`node_context_switches_total`,
		`rate(node_context_switches_total[1m])`,
		`sum by (node) (increase(node_context_switches_total[5m])) > 0`,
		`max_over_time(rate(node_context_switches_total[1m])[10m:30s])`,
		`sum(rate(node_context_switches_total[1m]))`,
	} {
		whole := func() promql.Matrix {
			q, err := a.ng.NewRangeQuery(context.Background(), a.q, nil, qs, start, end, 15*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			res := q.Exec(context.Background())
			m, err := res.Matrix()
			if err != nil {
				t.Fatal(err)
			}
			return copyMatrix(m)
		}()
		for _, parts := range []int{2, 3, 7} {
			res, done, err := a.splitRange(context.Background(), qs, start, end, 15*time.Second, parts)
			if err != nil || res.Err != nil {
				t.Fatalf("%s: %v %v", qs, err, res.Err)
			}
			got := res.Value.(promql.Matrix)
			if g, w := got.String(), whole.String(); g != w {
				t.Errorf("%s in %d parts differs from the whole query:\n got %.300s\nwant %.300s", qs, parts, g, w)
			}
			done()
		}
	}
	if splittable("x @ start()") {
		t.Error("a query with @ must stay whole")
	}
}

func copyMatrix(m promql.Matrix) promql.Matrix {
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: append([]promql.FPoint(nil), s.Floats...)}
	}
	return out
}
