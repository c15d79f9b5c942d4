package store

import (
	"context"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
)

// The raw series of the rollup tests: node_load1{node="cn01"} is the
// number of seconds since base, every second for three hours, except for
// a gap (announced with Gap, so stale markers) from 1:00:30 to 1:10:00.
const (
	rollHours = 3
	gapFrom   = 3600 + 30
	gapTo     = 3600 + 600
)

func rollVal(sec int) float64 { return float64(sec) }

func inGap(sec int) bool { return sec >= gapFrom && sec < gapTo }

// writeRaw appends the test series for seconds [from, to).
func writeRaw(t *testing.T, s *Store, from, to int) {
	t.Helper()
	descs := []*metric.Desc{load1}
	for sec := from; sec < to; sec++ {
		if inGap(sec) {
			if sec == gapFrom {
				if err := s.Gap("cn01", base.Add(gapFrom*time.Second), base.Add(gapTo*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		if err := s.AppendTick("cn01", base.Add(time.Duration(sec)*time.Second), descs, []float64{rollVal(sec)}, false); err != nil {
			t.Fatal(err)
		}
	}
}

// wantMinute computes a minute's aggregates from the raw definition.
func wantMinute(m int) (mn, mx, mean, n float64, ok bool) {
	sum := 0.0
	for sec := m * 60; sec < m*60+60; sec++ {
		if inGap(sec) {
			continue
		}
		v := rollVal(sec)
		if n == 0 || v < mn {
			mn = v
		}
		if n == 0 || v > mx {
			mx = v
		}
		sum += v
		n++
	}
	if n == 0 {
		return 0, 0, 0, 0, false
	}
	return mn, mx, sum / n, n, true
}

func rollupSeries(t *testing.T, r *Rollup, agg string) []point {
	t.Helper()
	got := readAll(t, r.db, labels.MustNewMatcher(labels.MatchEqual, RollupLabel, agg))
	key := labels.FromStrings(labels.MetricName, "node_load1", NodeLabel, "cn01", RollupLabel, agg).String()
	if len(got) != 1 || got[key] == nil {
		t.Fatalf("rollup %s: want one series %s, got %v", agg, key, got)
	}
	return got[key]
}

// checkRollups compares every stored aggregate with wantMinute; a stale
// marker must end the minute in which the gap starts.
func checkRollups(t *testing.T, r *Rollup) {
	t.Helper()
	for k, agg := range aggs {
		pts := rollupSeries(t, r, agg)
		i := 0
		for m := range rollHours * 60 {
			mn, mx, mean, n, ok := wantMinute(m)
			if ok {
				want := [...]float64{mn, mx, mean, n}[k]
				if i >= len(pts) || pts[i].T != base.Add(time.Duration(m)*time.Minute).UnixMilli() || pts[i].V != want {
					t.Fatalf("%s minute %d: want %v at minute start, got %v", agg, m, want, pts[i:min(i+1, len(pts))])
				}
				i++
			}
			if m == gapFrom/60 {
				end := base.Add(time.Duration(m+1)*time.Minute).UnixMilli() - 1
				if i >= len(pts) || pts[i].T != end || !value.IsStaleNaN(pts[i].V) {
					t.Fatalf("%s: want a stale marker at %d ending minute %d, got %v", agg, end, m, pts[i:min(i+1, len(pts))])
				}
				i++
			}
		}
		if i != len(pts) {
			t.Fatalf("%s: %d unexpected extra samples: %v", agg, len(pts)-i, pts[i:])
		}
	}
}

func TestRollupStepAndQueryAcrossBoundary(t *testing.T) {
	ctx := context.Background()
	rollDir := t.TempDir()
	end := base.Add(rollHours * time.Hour)

	// Phase 1: three hours of raw data, rolled up.
	full := openT(t, t.TempDir())
	writeRaw(t, full, 0, rollHours*3600)
	r, err := OpenRollup(full, RollupOptions{Dir: rollDir})
	if err != nil {
		t.Fatal(err)
	}
	// The last minute ends at `end`; with the 30s delay it is complete
	// once now passes end+30s, not before.
	n, err := r.Step(ctx, end.Add(29*time.Second))
	if err != nil || n != rollHours*60-1 {
		t.Fatalf("first step: %d minutes, %v; want %d", n, err, rollHours*60-1)
	}
	if n, err = r.Step(ctx, end.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("second step: %d minutes, %v; want 1", n, err)
	}
	if !r.Watermark().Equal(end) {
		t.Fatalf("watermark %s, want %s", r.Watermark(), end)
	}
	checkRollups(t, r)
	if n, err = r.Step(ctx, end.Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("step with nothing new: %d minutes, %v", n, err)
	}
	// Forced re-run from scratch (as after losing the watermark): the
	// same samples are written again, nothing is counted twice.
	r.watermark.Store(0)
	if n, err = r.Step(ctx, end.Add(time.Minute)); err != nil || n != rollHours*60 {
		t.Fatalf("re-run: %d minutes, %v", n, err)
	}
	checkRollups(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := full.Close(); err != nil {
		t.Fatal(err)
	}

	// Phase 2: raw retention has dropped all but the last hour; a new
	// process reopens the rollups.
	rawFrom := (rollHours - 1) * 3600
	recent := openT(t, t.TempDir())
	defer recent.Close()
	writeRaw(t, recent, rawFrom, rollHours*3600)
	r, err = OpenRollup(recent, RollupOptions{Dir: rollDir})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Watermark().Equal(end) {
		t.Fatalf("watermark after restart %s, want %s", r.Watermark(), end)
	}
	if n, err = r.Step(ctx, end.Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("step after restart: %d minutes, %v; want 0", n, err)
	}

	api := query.New(r.Queryable(), query.Options{})
	// Every 30s, so steps inside minutes see the minute's rollup carried.
	step := 30 * time.Second
	res, done, err := api.Range(ctx, "node_load1", base, end.Add(-time.Second), step)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	mat, err := res.Matrix()
	if err != nil {
		t.Fatal(err)
	}
	if len(mat) != 1 || mat[0].Metric.String() != `{__name__="node_load1", node="cn01"}` {
		t.Fatalf("want the one raw-labelled series, got %v", mat)
	}
	got := map[int64]float64{}
	for _, p := range mat[0].Floats {
		got[p.T] = p.F
	}
	checked := 0
	for ts := base; ts.Before(end); ts = ts.Add(step) {
		sec := int(ts.Sub(base) / time.Second)
		var want float64
		var ok bool
		if sec >= rawFrom {
			want, ok = rollVal(sec), true // raw
		} else {
			m := sec / 60
			_, _, want, _, ok = wantMinute(m)
			if m == gapFrom/60 {
				ok = true // the stale marker comes at the minute's end
			}
		}
		v, present := got[ts.UnixMilli()]
		if present != ok || (ok && v != want) {
			t.Fatalf("at %s (second %d): got %v (present %v), want %v (present %v)", ts.Format(time.TimeOnly), sec, v, present, want, ok)
		}
		checked++
		delete(got, ts.UnixMilli())
	}
	if len(got) != 0 || checked != rollHours*120 {
		t.Fatalf("checked %d steps, %d unexpected points: %v", checked, len(got), got)
	}

	// A selector naming the aggregate reads it, labelled, over the range.
	vec, err := api.InstantSamples(ctx, `node_load1{__rollup__="max"}`, base.Add(30*time.Minute+10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(vec) != 1 || vec[0].Value != 30*60+59 {
		t.Fatalf("max rollup at 0:30:10: got %+v, want 1859", vec)
	}
	// Also where raw data exists: the last rolled-up minute's count.
	vec, err = api.InstantSamples(ctx, `node_load1{__rollup__="count"}`, end.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(vec) != 1 || vec[0].Value != 60 || vec[0].Labels[RollupLabel] != AggCount {
		t.Fatalf("count rollup in the raw period: got %+v, want 60 labelled count", vec)
	}
}

func TestRollupEmptyRaw(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	r, err := OpenRollup(s, RollupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n, err := r.Step(context.Background(), time.Now()); err != nil || n != 0 {
		t.Fatalf("empty store: %d minutes, %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(s.opts.Dir, "rollup")); err != nil {
		t.Fatalf("default rollup dir: %v", err)
	}
}

func TestRollupBadWatermark(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, watermarkFile)
	if err := os.WriteFile(path, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenRollup(s, RollupOptions{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("want an error naming %s, got %v", path, err)
	}
}

func TestParseWatermark(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0\n", 0, true},
		{"1800000000000\n", 1_800_000_000_000, true},
		{"1800000000000", 1_800_000_000_000, true},
		{"", 0, false},
		{"\n", 0, false},
		{"1800000000001\n", 0, false}, // not minute-aligned
		{"-60000\n", 0, false},
		{"60000\n\n", 0, false},
		{" 60000\n", 0, false},
		{"1e9\n", 0, false},
		{"99999999999999999999999\n", 0, false},
	} {
		got, err := parseWatermark("wm", []byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseWatermark(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseWatermark(f *testing.F) {
	f.Add([]byte("60000\n"))
	f.Add([]byte("-1"))
	f.Add([]byte("1800000000000"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := parseWatermark("wm", b)
		if err != nil {
			return
		}
		if ms < 0 || ms%RollupStep.Milliseconds() != 0 {
			t.Fatalf("accepted %q as %d", b, ms)
		}
		if back, err := parseWatermark("wm", []byte(strconv.FormatInt(ms, 10)+"\n")); err != nil || back != ms {
			t.Fatalf("round trip of %d: %d, %v", ms, back, err)
		}
	})
}

func TestWatermarkWriteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), watermarkFile)
	want := base.UnixMilli()
	if err := writeWatermark(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readWatermark(path)
	if err != nil || got != want {
		t.Fatalf("read back %d, %v; want %d", got, err, want)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

// Raw data starting inside a minute that was never rolled up must stay
// visible through the rollup Queryable.
func TestRollupPartialFirstMinute(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	start := base.Add(10 * time.Second)
	for i := range 5 {
		if err := s.AppendTick("cn01", start.Add(time.Duration(i)*time.Second), []*metric.Desc{load1}, []float64{float64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenRollup(s, RollupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	vec, err := query.New(r.Queryable(), query.Options{}).InstantSamples(context.Background(), "node_load1", start.Add(4*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(vec) != 1 || vec[0].Value != 4 {
		t.Fatalf("got %+v, want node_load1 = 4", vec)
	}
}

// Run catches up at start and returns when ctx ends.
func TestRollupRunCatchesUp(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	now := time.Now()
	first := now.Add(-10 * time.Minute).Truncate(time.Minute)
	for ts := first; ts.Before(now.Add(-5 * time.Minute)); ts = ts.Add(time.Second) {
		if err := s.AppendTick("cn01", ts, []*metric.Desc{load1}, []float64{1}, false); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenRollup(s, RollupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	// Minutes are due DefaultRollupDelay after their end.
	want := now.Add(-DefaultRollupDelay).Truncate(time.Minute)
	for deadline := time.Now().Add(10 * time.Second); r.Watermark().Before(want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("watermark %s, want at least %s", r.Watermark(), want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := rollupSeries(t, r, AggCount); len(got) < 5 || got[0].T != first.UnixMilli() || got[0].V != 60 {
		t.Fatalf("count rollups: %v", got)
	}
}

// Rollups go to blocks, not into the rollup database's head: there four
// series per raw series stayed in memory for hours, more than the raw head
// (issue 12). A pass larger than one block writer's batch writes several
// overlapping blocks, and every series reads back once.
func TestRollupWritesBlocksNotHead(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	const nodes = 25
	descs := []*metric.Desc{load1}
	t0 := time.Now().Add(-20 * time.Minute).Truncate(time.Minute)
	for sec := range 5 * 60 {
		for n := range nodes {
			if err := s.AppendTick("cn"+strconv.Itoa(n), t0.Add(time.Duration(sec)*time.Second), descs, []float64{float64(n)}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	r, err := OpenRollup(s, RollupOptions{PassGCPercent: 17})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.batchSeries = 40 // 10 raw series a block: 3 blocks for 25 nodes
	var gcInPass int
	r.pageOut = func(string) (int64, error) { // called after each block
		gcInPass = debug.SetGCPercent(-1)
		debug.SetGCPercent(gcInPass)
		return 0, nil
	}
	defer debug.SetGCPercent(debug.SetGCPercent(60))
	if n, err := r.Step(context.Background(), t0.Add(5*time.Minute+DefaultRollupDelay)); err != nil || n != 5 {
		t.Fatalf("Step = %d, %v; want 5 minutes", n, err)
	}
	if gcInPass != 17 {
		t.Errorf("GC percent during the pass %d, want PassGCPercent 17", gcInPass)
	}
	if gc := debug.SetGCPercent(60); gc != 60 {
		t.Errorf("GC percent after the pass %d, want 60 restored", gc)
	}
	if h := r.db.Head().NumSeries(); h != 0 {
		t.Errorf("rollup head holds %d series, want 0", h)
	}
	// The pass wrote 3 overlapping blocks and merged them at its end.
	if b := len(r.db.Blocks()); b != 1 {
		t.Errorf("%d rollup blocks after the pass, want its 3 merged into 1", b)
	}
	got := readAll(t, r.db, labels.MustNewMatcher(labels.MatchEqual, RollupLabel, AggMean))
	if len(got) != nodes {
		t.Fatalf("%d mean series, want %d", len(got), nodes)
	}
	for k, pts := range got {
		if len(pts) != 5 {
			t.Errorf("%s: %d minutes, want 5: %v", k, len(pts), pts)
		}
	}
}

// Raw samples stay raw next to rollups: a server that started mid-minute
// and rolled up its first minutes must answer a range query near "now",
// starting inside the first minute, with every raw sample (issue 13: the
// first, partial minute came back as one rollup point).
func TestRollupRangeNearNowKeepsEveryRawSample(t *testing.T) {
	ctx := context.Background()
	s := openT(t, t.TempDir())
	defer s.Close()
	start := base.Add(25 * time.Second) // mid-minute, as a server starts
	const n = 4*60 + 10                 // 1 s samples for a few minutes
	for i := range n {
		if err := s.AppendTick("cn01", start.Add(time.Duration(i)*time.Second), []*metric.Desc{load1}, []float64{float64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenRollup(s, RollupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	now := start.Add(n * time.Second)
	if m, err := r.Step(ctx, now); err != nil || m < 3 {
		t.Fatalf("step: %d minutes rolled up, %v; want the first minutes", m, err)
	}
	api := query.New(r.Queryable(), query.Options{})
	for _, from := range []time.Duration{0, 10 * time.Second, 50 * time.Second, 95 * time.Second} {
		qs, qe := start.Add(from), now.Add(-time.Second)
		res, done, err := api.Range(ctx, "node_load1", qs, qe, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		mat, err := res.Matrix()
		if err != nil {
			done()
			t.Fatal(err)
		}
		if len(mat) != 1 {
			done()
			t.Fatalf("from +%s: %d series, want 1", from, len(mat))
		}
		pts := mat[0].Floats
		want := int(qe.Sub(qs)/time.Second) + 1
		if len(pts) != want {
			t.Errorf("from +%s: %d points, want %d (one per raw sample)", from, len(pts), want)
		}
		for _, p := range pts {
			sec := float64(time.UnixMilli(p.T).Sub(start) / time.Second)
			if p.F != sec {
				t.Errorf("from +%s: at %s got %v, want the raw sample %v", from, time.UnixMilli(p.T).UTC().Format(time.TimeOnly), p.F, sec)
				break
			}
		}
		done()
	}
	// Before the raw data starts there is nothing, not a rollup point
	// standing in for it.
	vec, err := api.InstantSamples(ctx, "node_load1", start.Add(-time.Second))
	if err != nil || len(vec) != 0 {
		t.Errorf("before the first sample: %+v, %v; want nothing", vec, err)
	}
}
