package store

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// TestTargetLabels checks the labels a node's series get with a job set:
// job and instance beside node on every series and on up, node_exporter's
// NUMA node label kept as it is, and a plugin's job or instance label
// stored as exported_*.
func TestTargetLabels(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Job: "node"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	numa := metric.NewDesc("node_memory_numa_MemFree", "", metric.Gauge, "node", "1")
	spoof := metric.NewDesc("x_info", "", metric.Gauge, "job", "slurm", "instance", "a:1")
	if err := s.AppendTick("cn01", base, []*metric.Desc{load1, numa, spoof}, []float64{1.5, 42, 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUp("cn01", base, true); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, "instance", "cn01"))
	ms := base.UnixMilli()
	want := map[string][]point{
		`{__name__="node_load1", instance="cn01", job="node", node="cn01"}`:                                            {{ms, 1.5}},
		`{__name__="node_memory_numa_MemFree", instance="cn01", job="node", node="1"}`:                                 {{ms, 42}},
		`{__name__="up", instance="cn01", job="node", node="cn01"}`:                                                    {{ms, 1}},
		`{__name__="x_info", exported_instance="a:1", exported_job="slurm", instance="cn01", job="node", node="cn01"}`: {{ms, 1}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stored\n%v\nwant\n%v", got, want)
	}

	// A gap stale-marks the NUMA series too, found by instance.
	if err := s.Gap("cn01", base.Add(time.Second), base.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	got = readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_memory_numa_MemFree"))
	for k, pts := range got {
		if len(pts) != 2 || !value.IsStaleNaN(pts[1].V) {
			t.Errorf("%s after a gap: %v, want a stale marker", k, pts)
		}
	}
	if len(got) != 1 {
		t.Errorf("NUMA series: %v", got)
	}
}

// TestTargetLabelsOff checks a store without a job keeps the old label sets
// (a data directory of an older Vigil read by tools that open it so) and
// keeps the host's node label over a plugin's.
func TestTargetLabelsOff(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	numa := metric.NewDesc("node_memory_numa_MemFree", "", metric.Gauge, "node", "1")
	if err := s.AppendTick("cn01", base, []*metric.Desc{load1, numa}, []float64{1.5, 42}, false); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	keys := fmt.Sprint(got)
	for _, w := range []string{`{__name__="node_load1", node="cn01"}`, `{__name__="node_memory_numa_MemFree", exported_node="1", node="cn01"}`} {
		if !strings.Contains(keys, w) {
			t.Errorf("stored %s, want %s", keys, w)
		}
	}
	if strings.Contains(keys, "instance") || strings.Contains(keys, "job") {
		t.Errorf("target labels without a job: %s", keys)
	}
}

// TestSeriesLabelsRefused checks descriptors whose labels cannot be stored.
func TestSeriesLabelsRefused(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), Job: "node"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, d := range []*metric.Desc{
		metric.NewDesc("x", "", metric.Gauge, "", "v"),
		metric.NewDesc("x", "", metric.Gauge, "__name__", "y"),
		metric.NewDesc("x", "", metric.Gauge, "a", "1", "a", "2"),
		metric.NewDesc("x", "", metric.Gauge, "exported_job", "1", "job", "2"),
	} {
		if err := s.AppendTick("cn01", base, []*metric.Desc{d}, []float64{math.Pi}, false); err == nil {
			t.Errorf("%v: stored, want an error", d.Labels)
		}
	}
}

// TestUpgradeRetiresUntargetedSeries opens a data directory written
// without target labels with a job: the old series of the last five
// minutes end with a stale marker, so a query by node sees one series.
func TestUpgradeRetiresUntargetedSeries(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	now := time.Now().Truncate(time.Second)
	old := now.Add(-time.Hour)
	for _, at := range []time.Time{old, now.Add(-10 * time.Second)} {
		if err := s.AppendTick("cn01", at, []*metric.Desc{load1}, []float64{1}, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendTick("cn02", old, []*metric.Desc{load1}, []float64{2}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(Options{Dir: dir, Job: "node"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AppendTick("cn01", now.Add(time.Second), []*metric.Desc{load1}, []float64{3}, false); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_load1"))
	oldKey := `{__name__="node_load1", node="cn01"}`
	if pts := got[oldKey]; len(pts) != 3 || !value.IsStaleNaN(pts[2].V) {
		t.Errorf("%s: %v, want its two samples and a stale marker", oldKey, pts)
	}
	if pts := got[`{__name__="node_load1", node="cn02"}`]; len(pts) != 1 {
		t.Errorf("cn02, silent for an hour: %v, want it left alone", pts)
	}
	if pts := got[`{__name__="node_load1", instance="cn01", job="node", node="cn01"}`]; len(pts) != 1 || pts[0].V != 3 {
		t.Errorf("new series: %v", pts)
	}
	// Once only: series without target labels written later (remote
	// write of a sender that sets none) are not marked at the next start.
	app := s.Appender(context.Background())
	rw := labels.FromStrings(labels.MetricName, "rw", "node", "x")
	if _, err := app.Append(0, rw, now.Add(2*time.Second).UnixMilli(), 1); err != nil {
		t.Fatal(err)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: dir, Job: "node"}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if pts := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "rw")); len(pts) != 1 || len(pts[rw.String()]) != 1 {
		t.Errorf("remote-write series after a second start: %v, want its one sample", pts)
	}
}

// BenchmarkTargetLabelsHead measures what job and instance cost: heap
// bytes per head series after 1000 nodes × 150 series were first stored
// (label sets built, cached, indexed), with and without a job.
func BenchmarkTargetLabelsHead(b *testing.B) {
	const nodes, series = 1000, 150
	descs := make([]*metric.Desc, series)
	vals := make([]float64, series)
	for i := range descs {
		descs[i] = metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", strconv.Itoa(i/8), "mode", strconv.Itoa(i%8))
	}
	names := make([]string, nodes)
	for i := range names {
		names[i] = fmt.Sprintf("cn%05d", i)
	}
	for _, job := range []string{"", "node"} {
		name := "job=" + job
		if job == "" {
			name = "job=none"
		}
		b.Run(name, func(b *testing.B) {
			var perSeries float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, err := Open(Options{Dir: b.TempDir(), Job: job})
				if err != nil {
					b.Fatal(err)
				}
				for _, n := range names {
					if err := s.AppendTick(n, base, descs, vals, false); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perSeries = float64(after.HeapAlloc-before.HeapAlloc) / (nodes * series)
				s.Close()
			}
			b.ReportMetric(perSeries, "heap-B/series")
		})
	}
}
