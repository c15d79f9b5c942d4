package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// A tick sent again after a lost connection (committed, but its
// acknowledgement lost) is older than what its series hold by then; the
// same samples count as stored, while a different value at that time is
// refused, and nothing is stored twice.
func TestAppendTickSentAgain(t *testing.T) {
	s := openT(t, t.TempDir())
	defer s.Close()
	// A scaled series (stored as integers) and a plain one.
	cpu := metric.NewDesc("node_cpu_seconds_total", "CPU time.", metric.Counter, "cpu", "0", "mode", "idle")
	descs := []*metric.Desc{load1, cpu}
	vals := func(k int) []float64 { return []float64{0.25 * float64(k), 100 + 0.01*float64(k)} }
	at := func(k int) time.Time { return base.Add(time.Duration(k) * time.Second) }
	for k := range 3 {
		if err := s.AppendTick("cn09", at(k), descs, vals(k), true); err != nil {
			t.Fatal(err)
		}
	}
	for k := range 3 { // all three again, in order, as a sender resends
		if err := s.AppendTick("cn09", at(k), descs, vals(k), true); err != nil {
			t.Fatalf("tick %d sent again: %v", k, err)
		}
	}
	err := s.AppendTick("cn09", at(1), descs, []float64{7, 100.01}, true)
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Rejected != 1 || rej.Total != 3 || !errors.Is(err, storage.ErrOutOfOrderSample) {
		t.Fatalf("a different value at a stored time: %v, want 1 of 3 refused as out of order", err)
	}
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, NodeLabel, "cn09"))
	for _, name := range []string{`node_load1`, `node_cpu_seconds_total`, `up`} {
		n := 0
		for series, pts := range got {
			if labels.MustNewMatcher(labels.MatchRegexp, "x", `\{__name__="`+name+`".*`).Matches(series) {
				n += len(pts)
			}
		}
		if n != 3 {
			t.Errorf("%s: %d samples stored, want 3 (%v)", name, n, fmt.Sprint(got))
		}
	}
}
