package fabric

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/store"
)

// readPromQL is the fabric read as PromQL expressions, as it was before
// the scan (scan.go): the reference the scan is checked against, and its
// peer in the benchmarks.
func readPromQL(ctx context.Context, q *query.API, now time.Time, window time.Duration) (*Fabric, error) {
	w := promDuration(window)
	f := &Fabric{Time: now.UTC(), Window: w}
	ports, err := q.InstantSamples(ctx, MetricPortInfo, now)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MetricPortInfo, err)
	}
	idx := links(f, ports)
	by := "max by (switch_guid, port) "
	errSum := func(mod string) string {
		return "sum by (switch_guid, port, node) ({__name__=~\"" + errorsRegexp + "\"}" + mod + ")"
	}
	values := []struct {
		qs  string
		set func(l *Link, v float64)
	}{
		{by + "(" + MetricPortUp + ")", func(l *Link, v float64) { l.Up = v > 0 }},
		{by + "(" + MetricPortRate + ")", func(l *Link, v float64) { l.Capacity = v }},
		{by + "(rate(" + MetricXmitData + "[" + w + "]))", func(l *Link, v float64) { l.TxBytes = v }},
		{by + "(rate(" + MetricRcvData + "[" + w + "]))", func(l *Link, v float64) { l.RxBytes = v }},
		{by + "(rate(" + MetricXmitWait + "[" + w + "]))", func(l *Link, v float64) { l.XmitWait = v }},
		// rate() of several names in one selector gives series that
		// differ only by the dropped name, which PromQL refuses; the
		// counters never go back (the sweeper carries resets), so their
		// sum's growth over the window is their summed rate, and reads
		// two samples a series instead of the window's all.
		{by + "((" + errSum("") + " - " + errSum(" offset "+w) + ") / " + strconv.FormatInt(int64(window/time.Second), 10) + " >= 0)",
			func(l *Link, v float64) { l.Errors = v }},
	}
	for _, v := range values {
		ss, err := q.InstantSamples(ctx, v.qs, now)
		if err != nil {
			return nil, fmt.Errorf("read link values (%s): %w", v.qs, err)
		}
		for _, s := range ss {
			i, ok := idx[portKey{s.Labels["switch_guid"], s.Labels["port"]}]
			if ok && !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) && s.Value >= 0 {
				v.set(&f.Links[i], s.Value)
			}
		}
	}
	for i := range f.Links {
		l := &f.Links[i]
		if l.Capacity > 0 {
			// A hostile capacity (1e-300) must not make an infinity,
			// which JSON cannot carry.
			if u := max(l.TxBytes, l.RxBytes) / l.Capacity; !math.IsInf(u, 0) {
				l.Utilization = u
			}
		}
	}
	infos, err := q.InstantSamples(ctx, MetricSwitchInfo, now)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", MetricSwitchInfo, err)
	}
	f.Switches, f.Truncated = switches(infos, f.Links, f.Truncated)
	return f, nil
}

// The scan must give what the PromQL expressions gave: the same links,
// states and capacities, and rates within a sample interval's share of the
// window (PromQL extrapolates to the window's edges, the scan does not).
func TestScanMatchesPromQL(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir(), Job: "node", MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().Truncate(time.Second)
	if err := fillFabric(st, simulate.FabricOptions{Nodes: 24 * 18, Seed: 7, Spines: 6}, now, 100*time.Second); err != nil {
		t.Fatal(err)
	}
	api := query.New(st, query.Options{})
	ctx := context.Background()
	for _, w := range []time.Duration{time.Minute, 10 * time.Second} {
		want, err := readPromQL(ctx, api, now, w)
		if err != nil {
			t.Fatal(err)
		}
		got, err := read(ctx, api, now, w)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Links) != len(want.Links) || len(got.Switches) != len(want.Switches) || len(got.Links) < 500 {
			t.Fatalf("window %s: scan %d links, %d switches; PromQL %d, %d", w, len(got.Links), len(got.Switches), len(want.Links), len(want.Switches))
		}
		if !reflect.DeepEqual(got.Switches, want.Switches) {
			t.Fatalf("window %s: switches differ", w)
		}
		// One interval's share of the window, and a little for rounding.
		tol := func(a, b float64) bool {
			return math.Abs(a-b) <= 1.5*float64(time.Second)/float64(w)*max(math.Abs(a), math.Abs(b))+1e-9
		}
		busy, errs := 0, 0
		for i, g := range got.Links {
			x := want.Links[i]
			if g.Name != x.Name || g.Up != x.Up || g.Capacity != x.Capacity || g.Host != x.Host {
				t.Fatalf("window %s, link %d: scan %+v, PromQL %+v", w, i, g, x)
			}
			if !tol(g.TxBytes, x.TxBytes) || !tol(g.RxBytes, x.RxBytes) || !tol(g.XmitWait, x.XmitWait) || !tol(g.Errors, x.Errors) || !tol(g.Utilization, x.Utilization) {
				t.Fatalf("window %s, %s: scan tx %g rx %g wait %g errors %g util %g; PromQL %g %g %g %g %g", w, g.Name,
					g.TxBytes, g.RxBytes, g.XmitWait, g.Errors, g.Utilization, x.TxBytes, x.RxBytes, x.XmitWait, x.Errors, x.Utilization)
			}
			if g.TxBytes > 0 {
				busy++
			}
			if g.Errors > 0 {
				errs++
			}
		}
		if busy == 0 {
			t.Fatalf("window %s: no link carried traffic: the comparison proves nothing", w)
		}
		t.Logf("window %s: %d links, %d with traffic, %d with errors", w, len(got.Links), busy, errs)
	}
}
