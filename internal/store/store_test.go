package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

type point struct {
	T int64
	V float64
}

// readAll returns every float sample matching ms, keyed by the series'
// label string.
func readAll(t *testing.T, q storage.Queryable, ms ...*labels.Matcher) map[string][]point {
	t.Helper()
	qr, err := q.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	out := map[string][]point{}
	set := qr.Select(context.Background(), true, nil, ms...)
	for set.Next() {
		s := set.At()
		it := s.Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			out[s.Labels().String()] = append(out[s.Labels().String()], point{ts, v})
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func openT(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	load1 = metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	cpuU  = metric.NewDesc("node_cpu_seconds_total", "CPU time.", metric.Counter, "cpu", "0", "mode", "user")
	base  = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

func TestAppendTickRoundTrip(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	descs := []*metric.Desc{load1, cpuU}
	for i := range 3 {
		for _, node := range []string{"cn01", "cn02"} {
			v := float64(i)
			if node == "cn02" {
				v += 100
			}
			if err := s.AppendTick(node, base.Add(time.Duration(i)*time.Second), descs, []float64{v, v * 2}, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, "node_.*"))
	ms := base.UnixMilli()
	want := map[string][]point{
		`{__name__="node_load1", node="cn01"}`:                                   {{ms, 0}, {ms + 1000, 1}, {ms + 2000, 2}},
		`{__name__="node_load1", node="cn02"}`:                                   {{ms, 100}, {ms + 1000, 101}, {ms + 2000, 102}},
		`{__name__="node_cpu_seconds_total", cpu="0", mode="user", node="cn01"}`: {{ms, 0}, {ms + 1000, 2}, {ms + 2000, 4}},
		`{__name__="node_cpu_seconds_total", cpu="0", mode="user", node="cn02"}`: {{ms, 200}, {ms + 1000, 202}, {ms + 2000, 204}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored:\n%v\nwant:\n%v", got, want)
	}
	st := s.Stats()
	if st.CachedSeries != 4 || st.HeadSeries != 4 || st.Ticks != 6 {
		t.Errorf("stats = %+v, want 4 cached, 4 head series, 6 ticks", st)
	}
	md := s.Metadata()
	if md["node_cpu_seconds_total"] != (Metadata{Type: "counter", Help: "CPU time."}) || md["node_load1"].Type != "gauge" {
		t.Errorf("metadata = %v", md)
	}
}

// A tick appended with up writes up{node}=1 alongside, and SetUp later
// writes 0 on the same series.
func TestAppendTickWithUp(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	var b metric.Batch
	b.Reset(base)
	b.Add(load1, 1.5)
	if err := s.AppendTick("cn07", b.Time, b.Descs, b.Values, true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUp("cn07", base.Add(time.Second), false); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn07"))
	ms := base.UnixMilli()
	want := map[string][]point{
		`{__name__="node_load1", node="cn07"}`: {{ms, 1.5}},
		`{__name__="up", node="cn07"}`:         {{ms, 1}, {ms + 1000, 0}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}

func TestAppendTickErrors(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	bad := metric.NewDesc("x", "", metric.Gauge, "__name__", "other")
	for _, tc := range []struct {
		name  string
		node  string
		descs []*metric.Desc
		vals  []float64
		want  string
	}{
		{"empty node", "", []*metric.Desc{load1}, []float64{1}, "empty node name"},
		{"length mismatch", "cn01", []*metric.Desc{load1}, nil, "1 descriptors but 0 values"},
		{"reserved label", "cn01", []*metric.Desc{bad}, []float64{1}, `a label name is empty or "__name__"`},
		{"nil desc", "cn01", []*metric.Desc{nil}, []float64{1}, "without a metric name"},
	} {
		err := s.AppendTick(tc.node, base, tc.descs, tc.vals, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	if got := readAll(t, s, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+")); len(got) != 0 {
		t.Errorf("failed appends left data: %v", got)
	}
}

func TestOutOfOrderSampleRejectedRestCommitted(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	if err := s.AppendTick("cn01", base.Add(time.Second), []*metric.Desc{load1}, []float64{1}, false); err != nil {
		t.Fatal(err)
	}
	// load1 goes back in time, cpuU is new: one rejected, one stored.
	err := s.AppendTick("cn01", base, []*metric.Desc{load1, cpuU}, []float64{9, 3}, false)
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Rejected != 1 || rej.Total != 2 || !errors.Is(err, storage.ErrOutOfOrderSample) {
		t.Fatalf("err = %v, want 1 of 2 rejected as out of order", err)
	}
	if !strings.Contains(err.Error(), `node_load1`) {
		t.Errorf("error %q does not name the series", err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn01"))
	if len(got) != 2 || len(got[`{__name__="node_load1", node="cn01"}`]) != 1 {
		t.Errorf("stored %v, want load1 unchanged and cpu stored", got)
	}
	if s.Stats().RejectedSamples != 1 {
		t.Errorf("rejected counter = %d, want 1", s.Stats().RejectedSamples)
	}
}

func TestGapWritesStaleMarkers(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	descs := []*metric.Desc{load1, cpuU}
	for i := range 3 {
		if err := s.AppendTick("cn01", base.Add(time.Duration(i)*time.Second), descs, []float64{1, 2}, false); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendTick("cn02", base.Add(time.Duration(i)*time.Second), descs, []float64{1, 2}, false); err != nil {
			t.Fatal(err)
		}
	}
	// cpuU of cn01 already has a sample at the gap start: not marked.
	if err := s.AppendTick("cn01", base.Add(3*time.Second), []*metric.Desc{cpuU}, []float64{5}, false); err != nil {
		t.Fatal(err)
	}
	from, to := base.Add(3*time.Second), base.Add(30*time.Second)
	if err := s.Gap("cn01", from, to); err != nil {
		t.Fatal(err)
	}
	// A repeated report of the same gap must not add a second marker.
	if err := s.Gap("cn01", from, to); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchRegexp, NodeLabel, "cn0."))
	load := got[`{__name__="node_load1", node="cn01"}`]
	if len(load) != 4 || load[3].T != from.UnixMilli() || !value.IsStaleNaN(load[3].V) {
		t.Errorf("cn01 load1 = %v, want 3 samples then a stale marker at %d", load, from.UnixMilli())
	}
	if cpu := got[`{__name__="node_cpu_seconds_total", cpu="0", mode="user", node="cn01"}`]; len(cpu) != 4 || math.IsNaN(cpu[3].V) {
		t.Errorf("cn01 cpu = %v, want 4 real samples", cpu)
	}
	if other := got[`{__name__="node_load1", node="cn02"}`]; len(other) != 3 {
		t.Errorf("cn02 was touched by cn01's gap: %v", other)
	}
	if err := s.Gap("cn01", to, from); err == nil || !strings.Contains(err.Error(), "before start") {
		t.Errorf("reversed gap: err = %v", err)
	}
	// One lost tick: from == to marks cn02's series stale at it.
	one := base.Add(4 * time.Second)
	if err := s.Gap("cn02", one, one); err != nil {
		t.Fatalf("one-tick gap: %v", err)
	}
	if l := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn02"))[`{__name__="node_load1", node="cn02"}`]; len(l) != 4 || l[3].T != one.UnixMilli() || !value.IsStaleNaN(l[3].V) {
		t.Errorf("cn02 load1 after a one-tick gap = %v, want a stale marker at %d", l, one.UnixMilli())
	}
	// Data after the gap appends normally.
	if err := s.AppendTick("cn01", to, descs, []float64{7, 8}, false); err != nil {
		t.Fatal(err)
	}
}

func TestReopenAfterClose(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if err := s.AppendTick("cn01", base, []*metric.Desc{load1}, []float64{4}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	defer s.Close()
	if got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn01")); len(got) != 1 {
		t.Errorf("after reopen: %v", got)
	}
	// The cache is empty after reopen but appends continue the same series.
	if err := s.AppendTick("cn01", base.Add(time.Second), []*metric.Desc{load1}, []float64{5}, false); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn01")); len(got[`{__name__="node_load1", node="cn01"}`]) != 2 {
		t.Errorf("after append: %v", got)
	}
}

// TestSteadyStateSkipsLabelBuilding checks the reference cache: once a
// node's series are known, a tick of 1,000 series allocates far fewer
// objects than it has series (building a label set costs at least one).
func TestSteadyStateSkipsLabelBuilding(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	s := openT(t, t.TempDir())
	defer s.Close()
	descs := make([]*metric.Desc, 1000)
	vals := make([]float64, len(descs))
	for i := range descs {
		descs[i] = metric.NewDesc("m", "", metric.Gauge, "i", strconv.Itoa(i))
	}
	ts := base
	tick := func() {
		ts = ts.Add(time.Second)
		if err := s.AppendTick("cn01", ts, descs, vals, false); err != nil {
			t.Fatal(err)
		}
	}
	tick()
	if allocs := testing.AllocsPerRun(50, tick); allocs > float64(len(descs))/4 {
		t.Errorf("%.0f allocations per steady-state tick of %d series", allocs, len(descs))
	}
	if st := s.Stats(); st.CachedSeries != len(descs) {
		t.Errorf("cached %d series, want %d", st.CachedSeries, len(descs))
	}
}

const crashEnv = "VIGIL_STORE_CRASH_DIR"

// TestCrashChild is the ingest process that TestKillDuringIngest kills.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process for TestKillDuringIngest")
	}
	s, err := Open(Options{Dir: dir})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	descs := []*metric.Desc{load1, cpuU}
	for i := 0; ; i++ {
		if err := s.AppendTick("cn01", base.Add(time.Duration(i)*time.Second), descs, []float64{float64(i), float64(i)}, false); err != nil {
			fmt.Println("error", err)
			os.Exit(3)
		}
		fmt.Println("committed", i)
	}
}

// TestKillDuringIngest kills an ingesting process with SIGKILL and checks
// that every tick it reported as committed survives the WAL replay.
func TestKillDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a subprocess")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	last := -1
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "error") {
			t.Fatalf("child: %s", line)
		}
		if n, ok := strings.CutPrefix(line, "committed "); ok {
			last, _ = strconv.Atoi(n)
			if last >= 500 {
				break
			}
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if last < 500 {
		t.Fatalf("child stopped after tick %d", last)
	}
	s := openT(t, dir)
	defer s.Close()
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_load1"))
	pts := got[`{__name__="node_load1", node="cn01"}`]
	// Every reported tick survives; ticks committed after the last line
	// we read may survive too, but only as a gap-free prefix (checked below).
	if len(pts) < last+1 {
		t.Fatalf("after kill at tick %d: %d samples survived", last, len(pts))
	}
	for i, p := range pts {
		if p.V != float64(i) || p.T != base.Add(time.Duration(i)*time.Second).UnixMilli() {
			t.Fatalf("sample %d = %+v", i, p)
		}
	}
	// The store accepts new ticks after the replay.
	if err := s.AppendTick("cn01", base.Add(time.Duration(len(pts))*time.Second), []*metric.Desc{load1}, []float64{1}, false); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(Options{}); err == nil {
		t.Error("no dir: no error")
	}
	if _, err := Open(Options{Dir: t.TempDir(), Retention: -time.Second}); err == nil {
		t.Error("negative retention: no error")
	}
	f := t.TempDir() + "/file"
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: f}); err == nil || !strings.Contains(err.Error(), f) {
		t.Errorf("dir is a file: err = %v, want it to name %s", err, f)
	}
}

// BenchmarkAppendTick appends ticks with cached series references: one
// AppendTick per op, rotating over the nodes, time advancing each round.
func BenchmarkAppendTick(b *testing.B) {
	for _, c := range []struct{ nodes, series int }{{1, 100}, {1, 1000}, {1000, 100}} {
		b.Run(fmt.Sprintf("nodes=%d/series=%d", c.nodes, c.series), func(b *testing.B) {
			s, err := Open(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			descs := make([]*metric.Desc, c.series)
			vals := make([]float64, c.series)
			for i := range descs {
				descs[i] = metric.NewDesc("bench_metric", "", metric.Gauge, "i", strconv.Itoa(i))
				vals[i] = float64(i)
			}
			nodes := make([]string, c.nodes)
			for i := range nodes {
				nodes[i] = fmt.Sprintf("cn%05d", i)
			}
			t, n := base, 0
			b.ReportAllocs()
			for b.Loop() {
				if n == 0 {
					t = t.Add(100 * time.Millisecond)
				}
				if err := s.AppendTick(nodes[n], t, descs, vals, false); err != nil {
					b.Fatal(err)
				}
				n = (n + 1) % len(nodes)
			}
			b.ReportMetric(float64(b.N)*float64(c.series)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}

// A reader open while ticks arrive must not leave memory behind. With the
// TSDB's isolation every series kept a ring of the appends made during the
// read, and the ring never shrinks: a one-minute rollup pass cost 85 to
// 160 MB at 512 nodes, for good (issue 12).
func TestOpenReaderLeavesNoMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 2 M samples")
	}
	const nodes, perNode, ticks = 200, 100, 100
	descs := make([]*metric.Desc, perNode)
	for i := range descs {
		descs[i] = metric.NewDesc("m"+strconv.Itoa(i), "test", metric.Gauge)
	}
	vals := make([]float64, perNode)
	// heapAfter appends ticks to a fresh store, with a querier open all
	// along if hold, and returns the live heap with the store still open.
	heapAfter := func(hold bool) uint64 {
		s := openT(t, t.TempDir())
		defer s.Close()
		t0 := time.Now().Add(-time.Hour)
		tick := func(k int) {
			for n := range nodes {
				if err := s.AppendTick("cn"+strconv.Itoa(n), t0.Add(time.Duration(k)*time.Second), descs, vals, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		tick(0)
		if hold {
			q, err := s.Querier(math.MinInt64, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
		}
		for k := 1; k < ticks; k++ {
			tick(k)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	free, held := heapAfter(false), heapAfter(true)
	if held > free+5<<20 {
		t.Fatalf("live heap %d MB with a reader open during %d ticks of %d series, %d MB without", held>>20, ticks, nodes*perNode, free>>20)
	}
}
