package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func descs(prefix string, n int) []*metric.Desc {
	out := make([]*metric.Desc, n)
	for i := range out {
		out[i] = metric.NewDesc(fmt.Sprintf("%s_%d", prefix, i), "test", metric.Gauge)
	}
	return out
}

// A node that creates more new series than its budget gets the excess
// refused (counted, not an error of the tick), keeps its up series and
// the series it has; other nodes have budgets of their own.
func TestSeriesLimitPerNode(t *testing.T) {
	s := openT(t, t.TempDir())
	reg := prometheus.NewRegistry()
	s.LimitSeries(SeriesLimits{PerNode: 3, Registerer: reg})
	refused := s.limits.refused.WithLabelValues(PathWire, "sender")
	up := metric.NewDesc("up", "up", metric.Gauge)
	ds := append(descs("m", 5), up)
	vals := make([]float64, len(ds))
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 3 {
		if err := s.AppendTick("cn01", t0.Add(time.Duration(i)*time.Second), ds, vals, false); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
	if err := s.AppendTick("cn02", t0, ds[:3], vals[:3], false); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	for _, want := range []string{`{__name__="m_0", node="cn01"}`, `{__name__="m_2", node="cn01"}`, `{__name__="up", node="cn01"}`, `{__name__="m_2", node="cn02"}`} {
		if len(got[want]) == 0 {
			t.Errorf("%s missing", want)
		}
	}
	if len(got[`{__name__="m_0", node="cn01"}`]) != 3 {
		t.Errorf("admitted series lost samples: %v", got[`{__name__="m_0", node="cn01"}`])
	}
	if len(got) != 4+3 {
		t.Errorf("%d series stored, want 7: %v", len(got), got)
	}
	if n := testutil.ToFloat64(refused); n != 6 {
		t.Errorf("refused %g samples, want 6 (2 series × 3 ticks)", n)
	}
	if n, err := testutil.GatherAndCount(reg, "vigil_series_refused_total"); err != nil || n != 1 {
		t.Errorf("registered metric: %d %v", n, err)
	}
}

// With the head at its cap, new series of anyone are refused; existing
// ones go on.
func TestSeriesLimitHead(t *testing.T) {
	s := openT(t, t.TempDir())
	t0 := time.Unix(1_700_000_000, 0)
	ds := descs("m", 4)
	if err := s.AppendTick("cn01", t0, ds, make([]float64, 4), false); err != nil {
		t.Fatal(err)
	}
	s.LimitSeries(SeriesLimits{MaxHeadSeries: 4})
	if err := s.AppendTick("cn01", t0.Add(time.Second), ds, make([]float64, 4), false); err != nil {
		t.Fatal(err)
	}
	app := s.Appender(context.Background())
	defer app.Rollback()
	var le *SeriesLimitError
	err := s.AdmitSeries(app, PathRemoteWrite, "10.0.0.1", labels.FromStrings(labels.MetricName, "new"))
	if !errors.As(err, &le) || !le.Head {
		t.Fatalf("new series at the head cap: %v, want a head limit error", err)
	}
	if err := s.AdmitSeries(app, PathRemoteWrite, "10.0.0.1", labels.FromStrings(labels.MetricName, "m_0", NodeLabel, "cn01")); err != nil {
		t.Errorf("existing series refused: %v", err)
	}
	if got := len(readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "m_3"))["{__name__=\"m_3\", node=\"cn01\"}"]); got != 2 {
		t.Errorf("existing series has %d samples, want 2", got)
	}
}
