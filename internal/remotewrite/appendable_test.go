package remotewrite

import (
	"context"
	"errors"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
)

// fakeAppendable refuses samples of series named "refused" and fails
// commits when failCommit is set.
type fakeAppendable struct{ failCommit bool }

type fakeAppender struct {
	storage.Appender // nil: only the methods below are called
	failCommit       bool
}

func (f fakeAppendable) Appender(context.Context) storage.Appender {
	return &fakeAppender{failCommit: f.failCommit}
}

func (a *fakeAppender) Append(_ storage.SeriesRef, l labels.Labels, _ int64, _ float64) (storage.SeriesRef, error) {
	if l.Get(labels.MetricName) == "refused" {
		return 0, errors.New("out of order")
	}
	return 1, nil
}

func (a *fakeAppender) Commit() error {
	if a.failCommit {
		return errors.New("disk full")
	}
	return nil
}

func (a *fakeAppender) Rollback() error { return nil }

// TestAppendableForwardsCommitted: what the server writes itself reaches
// the destinations once committed, minus refused samples and stale
// markers; a rollback or a failed commit forwards nothing.
func TestAppendableForwardsCommitted(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	w := runWriter(t, fastConfig(srv.URL))
	ok := labels.FromStrings(labels.MetricName, "vigil_ingest_ticks_total", "job", "vigil")

	app := w.Appendable(fakeAppendable{}).Appender(context.Background())
	for _, s := range []struct {
		l labels.Labels
		v float64
	}{{ok, 7}, {labels.FromStrings(labels.MetricName, "refused"), 1}, {ok, math.Float64frombits(value.StaleNaN)}} {
		_, _ = app.Append(0, s.l, 1000, s.v)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	rolled := w.Appendable(fakeAppendable{}).Appender(context.Background())
	_, _ = rolled.Append(0, ok, 2000, 8)
	_ = rolled.Rollback()
	failed := w.Appendable(fakeAppendable{failCommit: true}).Appender(context.Background())
	_, _ = failed.Append(0, ok, 3000, 9)
	if err := failed.Commit(); err == nil {
		t.Fatal("commit error not passed on")
	}
	// A marker sample after them: once it arrives, the others would have.
	last := w.Appendable(fakeAppendable{}).Appender(context.Background())
	_, _ = last.Append(0, ok, 4000, 10)
	_ = last.Commit()

	var got []float64
	waitFor(t, "the last sample", func() bool {
		_, ts := rec.snapshot()
		got = got[:0]
		for _, s := range ts {
			if labels.Compare(s.ToLabels(&labels.ScratchBuilder{}, nil), ok) != 0 {
				t.Fatalf("forwarded %v, want only %v", s.ToLabels(&labels.ScratchBuilder{}, nil), ok)
			}
			for _, x := range s.Samples {
				got = append(got, x.Value)
			}
		}
		return len(got) > 0 && got[len(got)-1] == 10
	})
	if len(got) != 2 || got[0] != 7 {
		t.Errorf("forwarded values %v, want [7 10]", got)
	}
}

// gaugeStore records AppendNodeGauge or fails.
type gaugeStore struct{ err error }

func (g gaugeStore) AppendNodeGauge(string, time.Time, []string, []float64) error { return g.err }

func TestTapNodeGauges(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	w := runWriter(t, fastConfig(srv.URL))
	w.Job = "node"
	if err := w.TapNodeGauges(gaugeStore{err: errors.New("refused")}).AppendNodeGauge("vigil_node_clock_skew", time.UnixMilli(1000), []string{"cn01"}, []float64{5}); err == nil {
		t.Fatal("store error not passed on")
	}
	if err := w.TapNodeGauges(gaugeStore{}).AppendNodeGauge("vigil_node_clock_offset_seconds", time.UnixMilli(2000), []string{"cn01", "", "cn02"}, []float64{0.25, 9, -0.5}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two samples", func() bool { _, ts := rec.snapshot(); return len(ts) >= 2 })
	_, ts := rec.snapshot()
	want := map[string]float64{"cn01": 0.25, "cn02": -0.5}
	if len(ts) != 2 {
		t.Fatalf("got %d series, want 2: %v", len(ts), ts)
	}
	for _, s := range ts {
		l := s.ToLabels(&labels.ScratchBuilder{}, nil)
		n := l.Get("node")
		if l.Get(labels.MetricName) != "vigil_node_clock_offset_seconds" || l.Get("instance") != n || l.Get("job") != "node" ||
			len(s.Samples) != 1 || s.Samples[0].Value != want[n] || s.Samples[0].Timestamp != 2000 {
			t.Errorf("got %v %v, want the offset of %s at 2000", l, s.Samples, n)
		}
	}
}
