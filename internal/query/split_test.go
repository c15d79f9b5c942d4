package query

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

// A range query split over cores gives exactly the whole query's result.
func TestSplitRangeMatchesWhole(t *testing.T) {
	s, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctr := metric.NewDesc("node_context_switches_total", "x", metric.Counter)
	r := rand.New(rand.NewPCG(1, 2))
	vals := map[string]float64{}
	// 20 nodes for an hour at 1 Hz, with a gap in one node's data.
	for i := range 3600 {
		ts := base.Add(time.Duration(i) * time.Second)
		for n := range 20 {
			node := fmt.Sprintf("cn%02d", n)
			if n == 3 && i > 1000 && i < 1500 {
				continue
			}
			vals[node] += float64(r.IntN(1000))
			if err := s.AppendTick(node, ts, []*metric.Desc{ctr}, []float64{vals[node]}); err != nil {
				t.Fatal(err)
			}
		}
	}
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
			res, err := a.splitRange(context.Background(), qs, start, end, 15*time.Second, parts)
			if err != nil || res.Err != nil {
				t.Fatalf("%s: %v %v", qs, err, res.Err)
			}
			got := res.Value.(promql.Matrix)
			if g, w := got.String(), whole.String(); g != w {
				t.Errorf("%s in %d parts differs from the whole query:\n got %.300s\nwant %.300s", qs, parts, g, w)
			}
		}
	}
	if runtime.GOMAXPROCS(0) > 1 {
		if p := a.rangeParts("x", start, end, 15*time.Second); p < 2 {
			t.Errorf("1h at 15s on %d cores: %d parts, want a split", runtime.GOMAXPROCS(0), p)
		}
	}
	if p := a.rangeParts("x @ start()", start, end, 15*time.Second); p != 1 {
		t.Errorf("a query with @ must stay whole, got %d parts", p)
	}
}

func copyMatrix(m promql.Matrix) promql.Matrix {
	out := make(promql.Matrix, len(m))
	for i, s := range m {
		out[i] = promql.Series{Metric: s.Metric, Floats: append([]promql.FPoint(nil), s.Floats...)}
	}
	return out
}
