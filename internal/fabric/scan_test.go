package fabric

import (
	"math"
	"testing"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// iter returns an iterator over samples (t ms, v) in order.
func iter(t *testing.T, s ...[2]float64) chunkenc.Iterator {
	t.Helper()
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range s {
		app.Append(int64(p[0]), p[1])
	}
	return c.Iterator(nil)
}

func TestNewestAt(t *testing.T) {
	stale := math.Float64frombits(value.StaleNaN)
	s := [][2]float64{{1000, 1}, {2000, 2}, {3000, 3}, {9000, stale}, {10000, 5}}
	for _, c := range []struct {
		ts       []int64
		lookback int64
		want     []float64
		ok       []bool
	}{
		{[]int64{2500}, 5000, []float64{2}, []bool{true}},
		{[]int64{2000}, 5000, []float64{2}, []bool{true}},  // at the instant itself
		{[]int64{999}, 5000, []float64{0}, []bool{false}},  // before the first sample
		{[]int64{8500}, 5000, []float64{0}, []bool{false}}, // 3000 is out of the lookback
		{[]int64{9500}, 8000, []float64{0}, []bool{false}}, // a stale marker ends the series
		{[]int64{2500, 10000}, 5000, []float64{2, 5}, []bool{true, true}},
		{[]int64{3000, 9000}, 10000, []float64{3, 0}, []bool{true, false}},
	} {
		vs := make([]float64, len(c.ts))
		oks := make([]bool, len(c.ts))
		newestAt(iter(t, s...), c.ts, c.lookback, vs, oks)
		for i := range c.ts {
			if oks[i] != c.ok[i] || (oks[i] && vs[i] != c.want[i]) {
				t.Errorf("at %v lookback %d: got %v %v, want %v %v", c.ts, c.lookback, vs, oks, c.want, c.ok)
			}
		}
	}
}

func TestCounterRate(t *testing.T) {
	stale := math.Float64frombits(value.StaleNaN)
	for _, c := range []struct {
		name string
		s    [][2]float64
		want float64
		ok   bool
	}{
		{"steady", [][2]float64{{0, 10}, {1000, 20}, {2000, 30}}, 10, true},
		{"reset counts from zero", [][2]float64{{0, 100}, {1000, 110}, {2000, 5}, {3000, 15}}, 25.0 / 3, true}, // +10, +5, +10
		{"stale marker skipped", [][2]float64{{0, 0}, {1000, 4}, {1500, stale}, {2000, 8}}, 4, true},
		{"one sample", [][2]float64{{0, 10}}, 0, false},
		{"none", nil, 0, false},
	} {
		got, ok := counterRate(iter(t, c.s...))
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: got %g %v, want %g %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
