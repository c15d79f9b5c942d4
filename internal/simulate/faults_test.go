package simulate

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

var faultStart = time.Unix(1_763_800_000, 0)

func newFaults(t testing.TB, o FaultOptions) *Faults {
	t.Helper()
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Start.IsZero() {
		o.Start = faultStart
	}
	f, err := NewFaults(o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// flakyNode is the index of the node of rank q among the flaky ones.
func flakyNode(t testing.TB, f *Faults, q int64) int {
	t.Helper()
	for i := range int(f.n) {
		if f.rank(i) == q {
			return i
		}
	}
	t.Fatalf("no flaky node of rank %d among %d", q, f.n)
	return -1
}

// healthOf is what one tick says of the checks: ok and failure reason by
// check, and the counters.
type healthOf struct {
	ok      map[string]float64
	reason  map[string]string
	failed  map[string]float64
	timeout map[string]float64
	dur     map[string]float64
}

func readHealth(t *testing.T, b *metric.Batch) healthOf {
	t.Helper()
	h := healthOf{ok: map[string]float64{}, reason: map[string]string{}, failed: map[string]float64{},
		timeout: map[string]float64{}, dur: map[string]float64{}}
	for _, s := range b.Samples() {
		d := s.Desc
		var m map[string]float64
		switch d.Name {
		case "vigil_health_check_ok":
			m = h.ok
		case "vigil_health_check_duration_seconds":
			m = h.dur
		case "vigil_health_checks_failed_total":
			m = h.failed
		case "vigil_health_check_timeouts_total":
			m = h.timeout
		case "vigil_health_check_failure":
			if len(d.Labels) != 2 || d.Labels[0].Name != "check" || d.Labels[1].Name != "reason" || s.Value != 1 {
				t.Fatalf("failure series %v = %v", d.Labels, s.Value)
			}
			if _, dup := h.reason[d.Labels[0].Value]; dup {
				t.Fatalf("two failure series for %s", d.Labels[0].Value)
			}
			h.reason[d.Labels[0].Value] = d.Labels[1].Value
			continue
		default:
			continue
		}
		if len(d.Labels) != 1 || d.Labels[0].Name != "check" {
			t.Fatalf("%s labels %v, want check only", d.Name, d.Labels)
		}
		m[d.Labels[0].Value] = s.Value
	}
	return h
}

var simCheckNames = []string{"scratch_rw", "ib0_up", "munge_running", "free_tmp"}

// TestHealthSeries: every node reports the health plugin's series for its
// checks; the first flaky node fails one check from its second run (30 s)
// for 3 to 6 minutes: ok 0 and one failure series with a reason, then ok 1
// without it; a node that is not flaky passes.
func TestHealthSeries(t *testing.T) {
	f := newFaults(t, FaultOptions{Nodes: 40, Seed: 7, Health: true})
	if f.Flaky() != 1 {
		t.Fatalf("%d flaky nodes of 40, want 1", f.Flaky())
	}
	sch := NewSchema(2)
	flaky := flakyNode(t, f, 0)
	n := NewNode(NodeName(flaky+1), sch, 1)
	n.SetFaults(f, flaky)
	other := NewNode(NodeName((flaky+1)%40+1), sch, 2)
	other.SetFaults(f, (flaky+1)%40)
	var b, ob metric.Batch
	var failFrom, failTo int = -1, -1
	var check, reason string
	lastFailed := 0.0
	for k := range 700 {
		tk := faultStart.Add(time.Duration(k) * time.Second)
		b.Reset(tk)
		n.Sample(tk, time.Second, &b)
		ob.Reset(tk)
		other.Sample(tk, time.Second, &ob)
		h, o := readHealth(t, &b), readHealth(t, &ob)
		for _, x := range []healthOf{h, o} {
			for _, m := range []map[string]float64{x.ok, x.dur, x.failed, x.timeout} {
				if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, slices.Sorted(slices.Values(simCheckNames))) {
					t.Fatalf("tick %d: checks %v, want %v", k, got, simCheckNames)
				}
			}
		}
		if len(o.reason) != 0 || o.ok["scratch_rw"] != 1 || o.failed["ib0_up"] != 0 {
			t.Fatalf("tick %d: a node that is not flaky fails: %+v", k, o)
		}
		failing := ""
		for c, v := range h.ok {
			if v == 0 {
				if failing != "" {
					t.Fatalf("tick %d: %s and %s fail", k, failing, c)
				}
				failing = c
			} else if v != 1 {
				t.Fatalf("tick %d: ok{%s} = %v", k, c, v)
			}
		}
		switch {
		case failing != "" && failFrom < 0:
			failFrom, check, reason = k, failing, h.reason[failing]
		case failing == "" && failFrom >= 0 && failTo < 0:
			failTo = k
		case failing != "" && failTo >= 0:
			if k < 600 {
				t.Fatalf("tick %d: fails again in the first period", k)
			}
		}
		if failing != "" && (len(h.reason) != 1 || h.reason[failing] == "") {
			t.Fatalf("tick %d: %s fails with failure series %v", k, failing, h.reason)
		}
		if failing == "" && len(h.reason) != 0 {
			t.Fatalf("tick %d: failure series %v while every check passes", k, h.reason)
		}
		if failing != "" && failing == check && failTo < 0 {
			if h.reason[check] != reason {
				t.Fatalf("tick %d: reason changed %q -> %q", k, reason, h.reason[check])
			}
			if h.failed[check] < lastFailed || h.failed[check] > float64((k-failFrom)/30+1) {
				t.Fatalf("tick %d: %v failed runs %d ticks into the failure", k, h.failed[check], k-failFrom)
			}
			lastFailed = h.failed[check]
		}
	}
	if failFrom != 30 {
		t.Fatalf("first failure at tick %d, want 30 (the second check run)", failFrom)
	}
	if d := failTo - failFrom; failTo < 0 || d < 180 || d > 360 || d%30 != 0 {
		t.Fatalf("failure from tick %d to %d, want 3 to 6 minutes of whole check runs", failFrom, failTo)
	}
	if len(reason) > 120 || !utf8.ValidString(reason) {
		t.Fatalf("reason %q", reason)
	}
	if want := float64((failTo - failFrom) / 30); lastFailed != want {
		t.Fatalf("%s: %v failed runs over %d ticks, want %v", check, lastFailed, failTo-failFrom, want)
	}
	t.Logf("node %s: %s failing from %ds to %ds: %q", n.Name, check, failFrom, failTo, reason)
}

// TestFaultCounts: about one node in 200 is flaky (one from 20 nodes),
// about one in 500 goes silent in each 10 minutes (one from 50), each
// for 80 to 100 s at once, the first outage 1 to 3 minutes in.
func TestFaultCounts(t *testing.T) {
	for _, tc := range []struct{ nodes, flaky, silent int }{
		{1, 0, 0}, {19, 0, 0}, {20, 1, 0}, {49, 1, 0}, {50, 1, 1}, {512, 3, 1}, {2000, 10, 4}, {20000, 100, 40},
	} {
		f := newFaults(t, FaultOptions{Nodes: tc.nodes, Seed: 3, Health: true, Outages: true})
		flaky := 0
		for i := range tc.nodes {
			if f.rank(i) >= 0 {
				flaky++
			}
		}
		if f.Flaky() != tc.flaky || flaky != tc.flaky {
			t.Errorf("%d nodes: %d flaky (says %d), want %d", tc.nodes, flaky, f.Flaky(), tc.flaky)
		}
		if f.Outages() != tc.silent {
			t.Errorf("%d nodes: %d silent per period, want %d", tc.nodes, f.Outages(), tc.silent)
		}
		// Each flaky node fails once in each 10 minutes (20 check runs),
		// 3 to 6 minutes, after a passing run; the others never.
		checks := map[int]bool{}
		for i := range min(tc.nodes, 2000) {
			for p := range int64(10) {
				var runs []int64
				for r := p * healthPeriod; r < (p+1)*healthPeriod; r++ {
					if c, reason := f.failing(i, r); c >= 0 {
						if reason < 0 || reason >= len(simChecks[c].reasons) {
							t.Fatalf("node %d run %d: check %d reason %d", i, r, c, reason)
						}
						checks[c] = true
						runs = append(runs, r)
					}
				}
				switch {
				case f.rank(i) < 0 && len(runs) > 0:
					t.Fatalf("%d nodes: node %d is not flaky but fails at runs %v", tc.nodes, i, runs)
				case f.rank(i) < 0:
				case len(runs) < 6 || len(runs) > 12 || runs[len(runs)-1]-runs[0] != int64(len(runs)-1) || runs[0] == p*healthPeriod:
					t.Fatalf("%d nodes: node %d fails at runs %v in period %d", tc.nodes, i, runs, p)
				}
			}
		}
		if tc.flaky >= 10 && len(checks) != nChecks {
			t.Errorf("%d nodes: only checks %v fail", tc.nodes, checks)
		}
		if tc.nodes > 2000 {
			continue // the counts above; scanning every tick is for smaller clusters
		}
		for p := range int64(3) {
			silent := map[int][]int64{}
			for k := p * 600; k < (p+1)*600; k++ {
				tk := faultStart.Add(time.Duration(k) * time.Second)
				for i := range tc.nodes {
					if f.Silent(i, tk) {
						silent[i] = append(silent[i], k)
					}
				}
			}
			if len(silent) != tc.silent {
				t.Errorf("%d nodes, period %d: %d nodes silent, want %d", tc.nodes, p, len(silent), tc.silent)
			}
			for i, ks := range silent {
				first, last := ks[0], ks[len(ks)-1]
				if int64(len(ks)) != last-first+1 || len(ks) < 80 || len(ks) > 100 {
					t.Errorf("%d nodes, period %d: node %d silent %d ticks in %d..%d", tc.nodes, p, i, len(ks), first, last)
				}
				if p == 0 && (first < 60 || first > 180) {
					t.Errorf("%d nodes: first outage of node %d starts at %ds, want 1 to 3 minutes in", tc.nodes, i, first)
				}
			}
		}
	}
}

// TestFaultsSeeded: the schedule depends on the seed only, not on the
// start time or the order of the questions.
func TestFaultsSeeded(t *testing.T) {
	sched := func(seed uint64, start time.Time) (flaky []int, silent [][2]int) {
		f := newFaults(t, FaultOptions{Nodes: 1000, Seed: seed, Health: true, Outages: true, Start: start})
		for i := range 1000 {
			if f.rank(i) >= 0 {
				flaky = append(flaky, i)
			}
		}
		for k := 999; k >= 0; k-- { // backwards: no state
			for i := range 1000 {
				if f.Silent(i, start.Add(time.Duration(k)*time.Second)) {
					silent = append(silent, [2]int{k, i})
				}
			}
		}
		return flaky, silent
	}
	f1, s1 := sched(1, faultStart)
	f2, s2 := sched(1, faultStart.Add(time.Hour+time.Second))
	f3, s3 := sched(2, faultStart)
	if len(f1) != 5 || len(s1) == 0 {
		t.Fatalf("seed 1: flaky %v, %d silent ticks", f1, len(s1))
	}
	if !reflect.DeepEqual(f1, f2) || !reflect.DeepEqual(s1, s2) {
		t.Error("the same seed gave another schedule")
	}
	if reflect.DeepEqual(f1, f3) || reflect.DeepEqual(s1, s3) {
		t.Errorf("seeds 1 and 2 gave the same schedule: flaky %v, silent %v", f1, s1)
	}
	// Two runs of a node give the same health series.
	f := newFaults(t, FaultOptions{Nodes: 20, Seed: 5, Health: true})
	i := flakyNode(t, f, 0)
	var a, b []float64
	for _, out := range []*[]float64{&a, &b} {
		n := NewNode("cn", NewSchema(1), 9)
		n.SetFaults(f, i)
		var batch metric.Batch
		for k := range 400 {
			tk := faultStart.Add(time.Duration(k) * time.Second)
			batch.Reset(tk)
			n.Sample(tk, time.Second, &batch)
			*out = append(*out, batch.Values[batch.Len()-HealthSeries-1:]...)
		}
	}
	if !slices.Equal(a, b) {
		t.Error("a node's health series differ between two runs")
	}
}

// TestHealthAllocs: the health series add no allocation to a tick, their
// failure series coming and going included, and a node's tick stays free
// of allocations in steady state.
func TestHealthAllocs(t *testing.T) {
	f := newFaults(t, FaultOptions{Nodes: 20, Seed: 5, Health: true})
	n := NewNode("cn", NewSchema(4), 1)
	n.SetFaults(f, flakyNode(t, f, 0))
	var b metric.Batch
	k := 0
	tick := func() {
		tk := faultStart.Add(time.Duration(k) * time.Second)
		k++
		b.Reset(tk)
		n.Sample(tk, time.Second, &b)
	}
	tick() // the batch grows to a tick with a failure series
	k = 30
	tick()
	k = 0
	if a := testing.AllocsPerRun(1200, func() {
		tk := faultStart.Add(time.Duration(k) * time.Second)
		k++
		b.Reset(tk)
		n.healthSeries(tk, &b)
	}); a != 0 {
		t.Errorf("%v allocations per health tick", a)
	}
	k = 0
	if a := testing.AllocsPerRun(300, tick); a != 0 {
		t.Errorf("%v allocations per node tick", a)
	}
}

// TestNewFaultsOptions: bad options are refused.
func TestNewFaultsOptions(t *testing.T) {
	for _, o := range []FaultOptions{{Nodes: 0, Interval: time.Second}, {Nodes: 1}, {Nodes: 1, Interval: time.Second, Scale: -1}} {
		if _, err := NewFaults(o); err == nil {
			t.Errorf("NewFaults(%+v) accepted", o)
		}
	}
}

type tickTimes struct {
	wire.NopHandler
	mu    sync.Mutex
	times map[string][]time.Time
}

func (h *tickTimes) Tick(node string, t time.Time, d []*metric.Desc, _ []float64) {
	h.mu.Lock()
	h.times[node] = append(h.times[node], t)
	h.mu.Unlock()
}

// TestRunOutage: with Outages the nodes the schedule picks stop ticking
// for the outage and then tick again; the other nodes, those of its group
// included, go on without a hole.
func TestRunOutage(t *testing.T) {
	const nodes, interval, scale = 60, 20 * time.Millisecond, 0.01
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &tickTimes{times: map[string][]time.Time{}}
	quiet := slog.New(slog.DiscardHandler)
	go func() { _ = wire.Serve(ctx, ln, wire.ServerOptions{Log: quiet}, h) }()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Nodes: nodes, Interval: interval, Upstream: []string{ln.Addr().String()}, GroupSize: 30,
			CPUs: 1, Seed: 4, Log: quiet, Outages: true, FaultScale: scale})
	}()
	// The same schedule: which node goes silent in the first period does
	// not depend on the start.
	f := newFaults(t, FaultOptions{Nodes: nodes, Interval: interval, Seed: 4, Outages: true, Scale: scale})
	silent := -1
	for k := range f.outPeriod {
		for i := range nodes {
			if f.Silent(i, faultStart.Add(time.Duration(k)*interval)) {
				silent = i
			}
		}
	}
	if silent < 0 {
		t.Fatal("nobody goes silent")
	}
	name := NodeName(silent + 1)
	minGap := time.Duration(f.outMin) * interval
	// Wait for the silent node to have come back: a hole of the outage's
	// length in its ticks, and ticks after it.
	deadline := time.Now().Add(15 * time.Second)
	var hole time.Duration
	for hole == 0 {
		h.mu.Lock()
		ts := h.times[name]
		for j := 1; j < len(ts); j++ {
			if d := ts[j].Sub(ts[j-1]); d >= minGap && j+3 < len(ts) {
				hole = d
			}
		}
		h.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%s: no hole of %s in %d ticks", name, minGap, len(ts))
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if max := time.Duration(f.outMax+1) * interval; hole > max {
		t.Errorf("%s silent %s, want at most %s", name, hole, max)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.times) != nodes {
		t.Fatalf("%d nodes ticked, want %d", len(h.times), nodes)
	}
	for node, ts := range h.times {
		if node == name {
			continue
		}
		for j := 1; j < len(ts); j++ {
			// Overruns on a busy machine may skip a few ticks, never most of an
			// outage's worth.
			if d := ts[j].Sub(ts[j-1]); d >= minGap*3/4 {
				t.Errorf("%s (not silent) has a hole of %s", node, d)
				break
			}
		}
	}
}
