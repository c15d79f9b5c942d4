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
	"github.com/prometheus/prometheus/tsdb"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func TestFutureSampleRefusedAndHeadNotAdvanced(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := Open(Options{Dir: t.TempDir(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	descs := []*metric.Desc{load1, cpuU}

	err = s.AppendTick("fast", now.Add(24*time.Hour), descs, []float64{1, 2}, false)
	var rej *RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, ErrTooFarInFuture) || rej.Rejected != 2 {
		t.Fatalf("tick a day ahead: got %v, want 2 samples rejected as too far in the future", err)
	}
	if err := s.SetUp("fast", now.Add(time.Hour), true); !errors.Is(err, ErrTooFarInFuture) {
		t.Fatalf("up an hour ahead: got %v, want ErrTooFarInFuture", err)
	}
	app := s.Appender(context.Background())
	if _, err := app.Append(0, labels.FromStrings("__name__", "x", "instance", "rw1"), now.Add(11*time.Minute).UnixMilli(), 1); !errors.Is(err, ErrTooFarInFuture) {
		t.Fatalf("remote-write sample 11 min ahead: got %v, want ErrTooFarInFuture", err)
	}
	if _, err := app.Append(0, labels.FromStrings("__name__", "x", "instance", "rw1"), now.Add(9*time.Minute).UnixMilli(), 1); err != nil {
		t.Fatalf("sample 9 min ahead (within the limit): %v", err)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if h := s.Stats().HeadMaxTime; h > now.Add(DefaultMaxFuture).UnixMilli() {
		t.Fatalf("head max time %s beyond the limit", time.UnixMilli(h))
	}
	// Every other node's samples, a little late, are still stored.
	for i, node := range []string{"cn01", "cn02"} {
		if err := s.AppendTick(node, now.Add(-time.Duration(i)*time.Second), descs, []float64{1, 2}, false); err != nil {
			t.Fatalf("node %s after the refused tick: %v", node, err)
		}
	}
	if got := testutil.ToFloat64(s.rejects.vec.WithLabelValues(reasonFuture, "fast")); got != 3 {
		t.Errorf("rejected{too_far_in_future,fast} = %v, want 3", got)
	}
	if got := testutil.ToFloat64(s.rejects.vec.WithLabelValues(reasonFuture, "rw1")); got != 1 {
		t.Errorf("rejected{too_far_in_future,rw1} = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "vigil_samples_rejected_total"); err != nil || n != 2 {
		t.Errorf("registered rejection series: %d, %v; want 2", n, err)
	}
}

func TestRejectionSenderLabelBounded(t *testing.T) {
	r := newRejections(nil)
	for i := range maxSenderLabels + 50 {
		r.add(reasonOutOfOrder, "n"+string(rune('a'+i%26))+time.Duration(i).String(), 1)
	}
	if got := testutil.CollectAndCount(r.vec); got != maxSenderLabels+1 {
		t.Fatalf("%d series, want %d senders plus \"other\"", got, maxSenderLabels+1)
	}
	if got := testutil.ToFloat64(r.vec.WithLabelValues(reasonOutOfOrder, "other")); got != 50 {
		t.Fatalf("other = %v, want 50", got)
	}
}

// poison writes, with the TSDB directly as an earlier Vigil did, an hour
// of samples and one a day ahead; with block set, everything is compacted
// into a block reaching a day into the future.
func poison(t *testing.T, dir string, now time.Time, block bool) {
	t.Helper()
	db, err := tsdb.Open(dir, nil, nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The head spans a day, so the TSDB's own background compaction would
	// race CompactHead below and could cut the future sample off the block.
	db.DisableCompactions()
	app := db.Appender(context.Background())
	for i := range 60 {
		ts := now.Add(-time.Hour + time.Duration(i)*time.Minute).UnixMilli()
		for _, n := range []string{"cn01", "cn02"} {
			if _, err := app.Append(0, labels.FromStrings("__name__", "up", NodeLabel, n), ts, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := app.Append(0, labels.FromStrings("__name__", "up", NodeLabel, "fast"), now.Add(24*time.Hour).UnixMilli(), 1); err != nil {
		t.Fatal(err)
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if block {
		h := db.Head()
		if err := db.CompactHead(tsdb.NewRangeHead(h, h.MinTime(), h.MaxTime())); err != nil {
			t.Fatal(err)
		}
		if len(db.Blocks()) == 0 || db.Blocks()[len(db.Blocks())-1].Meta().MaxTime <= now.Add(time.Hour).UnixMilli() {
			t.Fatal("setup: no block reaching into the future")
		}
	}
	// Confirm the poison: the next sample of a healthy node is refused.
	app = db.Appender(context.Background())
	_, err = app.Append(0, labels.FromStrings("__name__", "up", NodeLabel, "cn01"), now.UnixMilli()+1, 1)
	_ = app.Rollback()
	if err == nil {
		t.Fatal("setup: the poisoned TSDB still accepts samples at now")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRepairsFuturePoisonedStore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		block bool
	}{{"wal", false}, {"block", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			now := time.Now()
			poison(t, dir, now, tc.block)
			s := openT(t, dir)
			defer func() { s.Close() }()
			if h := s.Stats().HeadMaxTime; h > time.Now().Add(DefaultMaxFuture).UnixMilli() {
				t.Fatalf("head max time still %s", time.UnixMilli(h))
			}
			got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "up"))
			for _, n := range []string{"cn01", "cn02"} {
				key := labels.FromStrings("__name__", "up", NodeLabel, n).String()
				if len(got[key]) != 60 {
					t.Errorf("%s: %d samples kept, want the 60 of the past hour", n, len(got[key]))
				}
			}
			if fast := got[labels.FromStrings("__name__", "up", NodeLabel, "fast").String()]; len(fast) != 0 {
				t.Errorf("future samples kept: %v", fast)
			}
			// New samples of every node are accepted again.
			t1 := time.Now().Add(time.Second)
			for _, n := range []string{"cn01", "cn02", "fast"} {
				if err := s.AppendTick(n, t1, []*metric.Desc{load1}, []float64{1}, false); err != nil {
					t.Errorf("node %s after repair: %v", n, err)
				}
				if err := s.SetUp(n, t1, true); err != nil {
					t.Errorf("up of %s after repair: %v", n, err)
				}
			}
			// Reopening a repaired store changes nothing more.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openT(t, dir)
			after := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn01"))
			if n := len(after[labels.FromStrings("__name__", "up", NodeLabel, "cn01").String()]); n != 61 {
				t.Errorf("after reopening: %d up samples of cn01, want 61", n)
			}
		})
	}
}

// BenchmarkOpenRepair times store.Open of a data directory whose head
// holds an hour of 1 Hz samples of 10,000 series, healthy or poisoned by
// one sample a day ahead: the start-up delay the repair costs once.
func BenchmarkOpenRepair(b *testing.B) {
	for _, poisoned := range []bool{false, true} {
		b.Run(fmt.Sprintf("poisoned=%v", poisoned), func(b *testing.B) { benchOpen(b, poisoned) })
	}
}

func benchOpen(b *testing.B, poisoned bool) {
	const series, seconds = 10_000, 3600
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		db, err := tsdb.Open(dir, nil, nil, tsdb.DefaultOptions(), nil)
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		lsets := make([]labels.Labels, series)
		for i := range lsets {
			lsets[i] = labels.FromStrings("__name__", "node_load1", NodeLabel, "cn"+time.Duration(i).String())
		}
		for s := range seconds {
			app := db.Appender(context.Background())
			ts := now.Add(time.Duration(s-seconds) * time.Second).UnixMilli()
			for i, l := range lsets {
				if _, err := app.Append(0, l, ts, float64(i+s)); err != nil {
					b.Fatal(err)
				}
			}
			if err := app.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if poisoned {
			app := db.Appender(context.Background())
			if _, err := app.Append(0, lsets[0], now.Add(24*time.Hour).UnixMilli(), 1); err != nil {
				b.Fatal(err)
			}
			if err := app.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s, err := Open(Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.AppendTick("cn01", time.Now(), []*metric.Desc{load1}, []float64{1}, false); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
	b.ReportMetric(float64(series*seconds), "samples")
}
