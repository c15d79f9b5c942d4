package store_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

func Example() {
	dir, err := os.MkdirTemp("", "vigil-store")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := store.Open(store.Options{Dir: dir, Retention: 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	// Descriptors live as long as the series; the store caches by pointer.
	load := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	t0 := time.Unix(1_700_000_000, 0) // the past: the store refuses samples more than 10 min ahead
	for i := range 3 {
		t := t0.Add(time.Duration(i) * time.Second)
		if err := s.AppendTick("cn01", t, []*metric.Desc{load}, []float64{0.5 * float64(i)}, false); err != nil {
			panic(err)
		}
	}
	if err := s.SetUp("cn01", t0, true); err != nil {
		panic(err)
	}

	q, err := s.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		panic(err)
	}
	defer q.Close()
	set := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, store.NodeLabel, "cn01"))
	for set.Next() {
		it := set.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			t, v := it.At()
			fmt.Println(set.At().Labels(), t-t0.UnixMilli(), v)
		}
	}
	// Output:
	// {__name__="node_load1", node="cn01"} 0 0
	// {__name__="node_load1", node="cn01"} 1000 0.5
	// {__name__="node_load1", node="cn01"} 2000 1
	// {__name__="up", node="cn01"} 0 1
}
