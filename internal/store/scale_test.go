package store

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// rawQueryable reads the TSDB as stored, without the decoding of scale.go.
type rawQueryable struct{ s *Store }

func (r rawQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return r.s.tdb().Querier(mint, maxt)
}

// producers are the conversions the plugins and node_exporter apply to
// the kernel's integers, one per entry style of decimalScales.
var producers = map[string]func(j int64) float64{
	"node_cpu_seconds_total":            func(j int64) float64 { return float64(j) / 100 },
	"node_load1":                        func(j int64) float64 { return math.Round(float64(j)) / 100 },
	"node_disk_read_time_seconds_total": func(j int64) float64 { return float64(j) * (1.0 / 1000) },
	"vigil_plugin_duration_seconds":     func(j int64) float64 { return float64(j) / 1e6 },
}

func TestDecimalEveryProducedValueIsStoredScaled(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, produce := range producers {
		d := decimalScales[name]
		if d == nil {
			t.Fatalf("%s is not scaled", name)
		}
		for i := range 200_000 {
			j := int64(i)
			if i >= 100_000 {
				j = rng.Int64N(1 << 50)
			}
			v := produce(j)
			got, ok := d.encode(v)
			if !ok || got != float64(j) {
				t.Fatalf("%s: encode(%v) = %v, %v; want %d", name, v, got, ok, j)
			}
			if back := d.decode(got); math.Float64bits(back) != math.Float64bits(v) {
				t.Fatalf("%s: decode(%v) = %v, want %v", name, got, back, v)
			}
		}
	}
}

func TestDecimalRefusesWhatItCannotRestore(t *testing.T) {
	d := decimalScales["node_cpu_seconds_total"]
	for _, v := range []float64{0.123456, 1e300, math.Inf(1), math.Copysign(0, -1), 1 << 60, math.NaN()} {
		if j, ok := d.encode(v); ok && math.Float64bits(d.decode(j)) != math.Float64bits(v) {
			t.Errorf("encode(%v) accepted as %v, which decodes to %v", v, j, d.decode(j))
		}
	}
	if _, ok := d.encode(0.123456); ok {
		t.Error("0.123456 is not a multiple of 1/100 but was accepted")
	}
	stale := math.Float64frombits(value.StaleNaN)
	if j, ok := d.encode(stale); !ok || !value.IsStaleNaN(j) {
		t.Errorf("stale marker not kept: %v %v", j, ok)
	}
}

func FuzzDecimalRoundTrip(f *testing.F) {
	f.Add(12.34, int64(5))
	f.Add(0.001, int64(0))
	f.Fuzz(func(t *testing.T, v float64, j int64) {
		for name, d := range decimalScales {
			if s, ok := d.encode(v); ok && !value.IsStaleNaN(v) && math.Float64bits(d.decode(s)) != math.Float64bits(v) {
				t.Fatalf("%s: %v stored as %v reads back as %v", name, v, s, d.decode(s))
			}
		}
		j %= 1 << 52
		for name, produce := range producers {
			if _, ok := decimalScales[name].encode(produce(j)); !ok {
				t.Fatalf("%s: produced value %v of %d refused", name, produce(j), j)
			}
		}
	})
}

func TestScaledSeriesStoredAsIntegersAndReadExactly(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	disk := metric.NewDesc("node_disk_read_time_seconds_total", "", metric.Counter, "device", "sda")
	ctxsw := metric.NewDesc("node_context_switches_total", "", metric.Counter)
	descs := []*metric.Desc{cpuU, load1, disk, ctxsw}
	var want [][]float64
	for i := range 50 {
		vals := []float64{float64(1234567+i*97) / 100, math.Round(float64(i*13)) / 100, float64(98765+i*3) * (1.0 / 1000), float64(1e9 + i)}
		if i == 20 {
			vals[0] = 12345.678901 // not ticks: goes to the twin
			vals[2] = math.Pi
		}
		want = append(want, vals)
		if err := s.AppendTick("cn01", base.Add(time.Duration(i)*time.Second), descs, vals, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats().UnscaledSamples; got != 2 {
		t.Errorf("UnscaledSamples = %d, want 2", got)
	}
	// As stored: integers, and the two odd values in twins.
	raw := readAll(t, rawQueryable{s}, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	cpuRaw := raw[`{__name__="node_cpu_seconds_total", cpu="0", mode="user", node="cn01"}`]
	if len(cpuRaw) != 49 || cpuRaw[0].V != 1234567 || cpuRaw[1].V != 1234567+97 {
		t.Errorf("cpu series as stored: %d samples, first %v", len(cpuRaw), cpuRaw[:min(2, len(cpuRaw))])
	}
	twin := raw[`{__name__="node_cpu_seconds_total", __vigil_unscaled__="1", cpu="0", mode="user", node="cn01"}`]
	if len(twin) != 1 || twin[0].V != 12345.678901 {
		t.Errorf("twin as stored: %v", twin)
	}
	// As read: the same float64 bits as appended, the twin merged back in.
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	if len(got) != len(descs) {
		t.Fatalf("read %d series, want %d: %v", len(got), len(descs), got)
	}
	for k, d := range descs {
		key := labels.NewBuilder(labels.FromStrings(labels.MetricName, d.Name, NodeLabel, "cn01")).Set("cpu", "0").Set("mode", "user").Labels()
		switch d {
		case load1, ctxsw:
			key = labels.FromStrings(labels.MetricName, d.Name, NodeLabel, "cn01")
		case disk:
			key = labels.FromStrings(labels.MetricName, d.Name, "device", "sda", NodeLabel, "cn01")
		}
		pts := got[key.String()]
		if len(pts) != len(want) {
			t.Fatalf("%s: %d samples, want %d", key, len(pts), len(want))
		}
		for i, p := range pts {
			if p.T != base.Add(time.Duration(i)*time.Second).UnixMilli() || math.Float64bits(p.V) != math.Float64bits(want[i][k]) {
				t.Fatalf("%s sample %d = %v, want %v", key, i, p, want[i][k])
			}
		}
	}
	// The twin label is invisible to label queries.
	q, err := s.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	names, _, err := q.LabelNames(context.Background(), nil)
	if err != nil || slices.Contains(names, UnscaledLabel) {
		t.Errorf("label names %v, %v", names, err)
	}
	if vals, _, _ := q.LabelValues(context.Background(), UnscaledLabel, nil); len(vals) != 0 {
		t.Errorf("twin label values visible: %v", vals)
	}
}

func TestScaledSeriesThroughRawAppenderAndGap(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	lset := labels.FromStrings(labels.MetricName, "node_cpu_seconds_total", "cpu", "1", "mode", "idle", NodeLabel, "cn02")
	app := s.Appender(context.Background())
	vals := []float64{10.01, 10.02, 10.0333, 10.04}
	for i, v := range vals {
		if _, err := app.Append(0, lset, base.Add(time.Duration(i)*time.Second).UnixMilli(), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Gap("cn02", base.Add(10*time.Second), base.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn02"))
	pts := got[lset.String()]
	if len(got) != 1 || len(pts) != len(vals)+1 {
		t.Fatalf("read %v", got)
	}
	for i, v := range vals {
		if pts[i].V != v {
			t.Errorf("sample %d = %v, want %v", i, pts[i].V, v)
		}
	}
	if !value.IsStaleNaN(pts[len(vals)].V) {
		t.Errorf("gap did not end the series with a stale marker: %v", pts[len(vals)])
	}
	if s.Stats().UnscaledSamples != 1 {
		t.Errorf("UnscaledSamples = %d, want 1", s.Stats().UnscaledSamples)
	}
}

// BenchmarkReadScaled compares reading a scaled metric (decoded on the
// fly) with an unscaled one of the same shape, through Store.Querier.
func BenchmarkReadScaled(b *testing.B) {
	s := openT(b, b.TempDir())
	defer s.Close()
	const series, ticks = 100, 3600
	descs := make([]*metric.Desc, 0, 2*series)
	for i := range series {
		descs = append(descs, metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", strconv.Itoa(i), "mode", "user"),
			metric.NewDesc("node_intr_total", "", metric.Counter, "cpu", strconv.Itoa(i)))
	}
	vals := make([]float64, len(descs))
	for k := range ticks {
		for i := range vals {
			vals[i] = float64(k*(150+i%7)) / 100
			if i%2 == 1 {
				vals[i] = float64(k * (150 + i%7))
			}
		}
		if err := s.AppendTick("cn01", base.Add(time.Duration(k)*time.Second), descs, vals, false); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"node_cpu_seconds_total", "node_intr_total"} {
		b.Run(name, func(b *testing.B) {
			m := labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, name)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				q, _ := s.Querier(math.MinInt64, math.MaxInt64)
				set := q.Select(context.Background(), false, nil, m)
				var it chunkenc.Iterator
				for set.Next() {
					it = set.At().Iterator(it)
					for it.Next() == chunkenc.ValFloat {
						_, v := it.At()
						_ = v
						n++
					}
				}
				q.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/sample")
		})
	}
}

// TestLegacyDataDirStaysUnscaled: a data directory written before integer
// storage (TSDB files, no format marker) keeps values as they are, so old
// samples are not read as integers; a new directory is marked and scaled.
func TestLegacyDataDirStaysUnscaled(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if !s.scaled {
		t.Fatal("new directory not scaled")
	}
	s.Close()
	if b, err := os.ReadFile(filepath.Join(dir, formatFile)); err != nil || string(b) != formatDecimal {
		t.Fatalf("marker %q, %v", b, err)
	}
	s = openT(t, dir)
	if !s.scaled {
		t.Error("marked directory not scaled on reopen")
	}
	s.Close()

	// An older Vigil's directory: same TSDB files, no marker.
	if err := os.Remove(filepath.Join(dir, formatFile)); err != nil {
		t.Fatal(err)
	}
	s = openT(t, dir)
	defer s.Close()
	if s.scaled {
		t.Fatal("legacy directory switched to integer storage")
	}
	if err := s.AppendTick("cn01", base, []*metric.Desc{cpuU}, []float64{12.34}, false); err != nil {
		t.Fatal(err)
	}
	raw := readAll(t, rawQueryable{s}, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, cpuU.Name))
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, cpuU.Name))
	for _, m := range []map[string][]point{raw, got} {
		for _, pts := range m {
			if len(pts) != 1 || pts[0].V != 12.34 {
				t.Errorf("legacy store holds %v", m)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, formatFile)); err == nil {
		t.Error("legacy directory got the marker")
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, formatFile), []byte("decimal-scaling 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: bad}); err == nil || !strings.Contains(err.Error(), "unknown data format") {
		t.Errorf("unknown format: %v", err)
	}
}
