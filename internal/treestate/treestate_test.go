package treestate

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExpandHostList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: "cn1", want: []string{"cn1"}},
		{in: "cn[001-003]", want: []string{"cn001", "cn002", "cn003"}},
		{in: "cn[8-10,20]x", want: []string{"cn8x", "cn9x", "cn10x", "cn20x"}},
		{in: "r[1-2]n[1-2]", want: []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{in: "cn[3-1]", bad: true},
		{in: "cn[1-", bad: true},
		{in: "cn[a]", bad: true},
		{in: "cn]", bad: true},
		{in: "cn[0-99999999]", bad: true},
	} {
		got, err := ExpandHostList(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if !tc.bad && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzExpandHostList(f *testing.F) {
	f.Add("cn[001-128,200]")
	f.Fuzz(func(t *testing.T, s string) { _, _ = ExpandHostList(s) })
}

func TestLiveness(t *testing.T) {
	l := NewLiveness(3 * time.Second)
	l.SetExpected([]string{"a", "b"})
	t0 := time.Unix(1000, 0)
	if !l.Seen("a", t0, t0) {
		t.Error("first tick of a: want joined")
	}
	if l.Seen("a", t0.Add(time.Second), t0.Add(time.Second)) {
		t.Error("second tick: not a join")
	}
	if up, down := l.Counts(); up != 1 || down != 1 {
		t.Errorf("counts up %d down %d, want 1/1 (b expected, never seen)", up, down)
	}
	if d := l.Sweep(t0.Add(3 * time.Second)); len(d) != 0 {
		t.Errorf("down after 2s silence: %v", d)
	}
	if d := l.Sweep(t0.Add(4 * time.Second)); !reflect.DeepEqual(d, []string{"a"}) {
		t.Errorf("sweep after 3s silence = %v, want [a]", d)
	}
	if !l.Seen("a", t0.Add(5*time.Second), t0.Add(5*time.Second)) {
		t.Error("a coming back: want joined")
	}
	// An unexpected node that leaves is forgotten after a while.
	l.Seen("c", t0, t0)
	l.Sweep(t0.Add(4 * time.Second))
	l.Sweep(t0.Add(40 * time.Second))
	for _, s := range l.Snapshot() {
		if s.Node == "c" {
			t.Error("departed unexpected node c kept forever")
		}
	}
}

func TestLivenessBehindJudgedPerNode(t *testing.T) {
	l := NewLiveness(300 * time.Millisecond)
	t0 := time.Unix(1000, 0)
	for i := range 50 {
		l.Seen(fmt.Sprintf("n%02d", i), t0, t0.Add(5*time.Millisecond))
	}
	// Only the node whose clock is an hour slow keeps sending.
	now := t0
	for range 10 {
		now = now.Add(100 * time.Millisecond)
		l.Seen("slow", now.Add(-time.Hour), now)
	}
	if l.Behind() {
		t.Fatal("one node with a slow clock made the receiver look behind")
	}
	if d := l.Sweep(now); len(d) != 50 {
		t.Fatalf("%d stopped nodes marked down, want 50", len(d))
	}
	for _, s := range l.Snapshot() {
		if s.Node == "slow" && (s.ClockOffset > -time.Hour+time.Second || s.ClockOffset < -time.Hour-time.Second) {
			t.Errorf("clock offset of slow = %s, want about -1h", s.ClockOffset)
		}
	}
	// When every node's ticks arrive a second later than usual, the
	// receiver is behind.
	for i := range 50 {
		l.Seen(fmt.Sprintf("n%02d", i), now, now.Add(time.Second))
	}
	l.Seen("slow", now.Add(-time.Hour), now.Add(time.Second))
	if !l.Behind() {
		t.Fatal("all ticks a second late: want behind")
	}
	if l.Behind() {
		t.Fatal("Behind does not reset")
	}
}

// With ticks every interval and sweeps every half interval (as aggregators
// and ingest run them), a node that stops is down within 3 intervals and
// not before, and is up again on its first tick.
func TestDownWithinThreeIntervalsUpWithinOne(t *testing.T) {
	const iv = time.Second
	l := NewLiveness(3 * iv)
	t0 := time.Unix(2000, 0)
	var last time.Time
	for i := range 5 {
		last = t0.Add(time.Duration(i) * iv)
		if joined := l.Seen("cn1", last, last.Add(10*time.Millisecond)); joined != (i == 0) {
			t.Fatalf("tick %d: joined = %v", i, joined)
		}
	}
	arrived := last.Add(10 * time.Millisecond)
	var downAt time.Time
	for now := last; now.Before(last.Add(10 * iv)); now = now.Add(iv / 2) {
		if d := l.Sweep(now); len(d) > 0 {
			if len(d) != 1 || d[0] != "cn1" {
				t.Fatalf("sweep at %v = %v, want [cn1]", now.Sub(last), d)
			}
			downAt = now
			break
		}
	}
	if downAt.IsZero() || downAt.Sub(arrived) < 3*iv || downAt.Sub(arrived) > 3*iv+iv/2 {
		t.Fatalf("down %v after the last tick arrived, want 3 intervals (+ one half-interval sweep)", downAt.Sub(arrived))
	}
	if up, down := l.Counts(); up != 0 || down != 1 {
		t.Errorf("counts up %d down %d, want 0/1", up, down)
	}
	if d := l.Down(); len(d) != 1 || d[0] != "cn1" {
		t.Errorf("Down() = %v, want [cn1]", d)
	}
	back := downAt.Add(iv)
	if !l.Seen("cn1", back, back) {
		t.Error("first tick after down: want joined (up)")
	}
	if up, _ := l.Counts(); up != 1 {
		t.Errorf("after its tick, up = %d, want 1", up)
	}
	if d := l.Sweep(back.Add(iv)); len(d) != 0 {
		t.Errorf("sweep one interval after coming back: %v down", d)
	}
}

// Expected nodes come from host-list files (ranges, host:port, comments);
// listed nodes never seen are down, unlisted senders are still accepted.
func TestExpectedFromHostFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "children")
	if err := os.WriteFile(path, []byte("# rack 1\ncn[01-03] login1:22 # ssh\n\ngpu[8-9]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts, err := ReadHostFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cn01", "cn02", "cn03", "login1", "gpu8", "gpu9"}; !reflect.DeepEqual(hosts, want) {
		t.Fatalf("hosts %v, want %v", hosts, want)
	}
	l := NewLiveness(3 * time.Second)
	l.SetExpected(hosts)
	now := time.Unix(3000, 0)
	l.Seen("cn02", now, now)
	l.Seen("other", now, now)
	if up, down := l.Counts(); up != 2 || down != 5 {
		t.Errorf("counts up %d down %d, want 2/5", up, down)
	}
	down := l.Down()
	slices.Sort(down)
	if want := []string{"cn01", "cn03", "gpu8", "gpu9", "login1"}; !reflect.DeepEqual(down, want) {
		t.Errorf("Down() = %v, want %v", down, want)
	}
	for _, s := range l.Snapshot() {
		if s.Expected != (s.Node != "other") {
			t.Errorf("%s: Expected = %v", s.Node, s.Expected)
		}
	}
	// An expected node that stops is kept (down), an unexpected one is
	// forgotten after 10× DownAfter.
	l.Sweep(now.Add(3 * time.Second))
	l.Sweep(now.Add(31 * time.Second))
	if up, down := l.Counts(); up != 0 || down != 6 {
		t.Errorf("after both stopped: up %d down %d, want 0/6", up, down)
	}
	if err := os.WriteFile(path, []byte("cn01\ncn[2-\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHostFile(path); err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Errorf("bad range: err %v, want one naming %s:2", err, path)
	}
}

// LastTick is the newest tick's timestamp, not the last to arrive; nodes
// never heard from have none.
func TestLastTick(t *testing.T) {
	l := NewLiveness(3 * time.Second)
	l.SetExpected([]string{"cn2"})
	t0 := time.Unix(4000, 0)
	l.Seen("cn1", t0, t0)
	l.Seen("cn1", t0.Add(-time.Second), t0.Add(time.Second)) // a replayed, older tick
	if got, ok := l.LastTick("cn1"); !ok || !got.Equal(t0) {
		t.Errorf("LastTick(cn1) = %v %v, want %v", got, ok, t0)
	}
	for _, n := range []string{"cn2", "cn3"} {
		if got, ok := l.LastTick(n); ok {
			t.Errorf("LastTick(%s) = %v, want none", n, got)
		}
	}
}

// A node's clock offset is minus its smallest delay of the last one to
// two minutes: a clock two hours fast reads +2h, and a burst of replayed
// (late) ticks does not move it.
func TestClockOffsetFromSmallestDelay(t *testing.T) {
	l := NewLiveness(3 * time.Second)
	now := time.Unix(5000, 0)
	for i := range 5 {
		at := now.Add(time.Duration(i) * time.Second)
		l.Seen("fast", at.Add(2*time.Hour), at.Add(20*time.Millisecond))
		l.Seen("ok", at, at.Add(20*time.Millisecond))
	}
	// ok replays a minute of buffered ticks.
	at := now.Add(5 * time.Second)
	for i := range 60 {
		l.Seen("ok", at.Add(-time.Duration(60-i)*time.Second), at)
	}
	off := map[string]time.Duration{}
	for _, s := range l.Snapshot() {
		off[s.Node] = s.ClockOffset
	}
	if want := 2*time.Hour - 20*time.Millisecond; off["fast"] != want {
		t.Errorf("offset of fast = %v, want %v", off["fast"], want)
	}
	if want := -20 * time.Millisecond; off["ok"] != want {
		t.Errorf("offset of ok = %v, want %v (replayed ticks are not a wrong clock)", off["ok"], want)
	}
	// After two windows without replays the old minimum is forgotten.
	for i := range 3 {
		at := now.Add(time.Duration(i+1) * lagWindow)
		l.Seen("fast", at.Add(time.Hour), at)
	}
	for _, s := range l.Snapshot() {
		if s.Node == "fast" && s.ClockOffset != time.Hour {
			t.Errorf("offset of fast after its clock was set back = %v, want 1h", s.ClockOffset)
		}
	}
}

// An expected child that never connected is listed by ExpectedDown (for
// the aggregator to report upstream); the tier above keeps a node it only
// heard reported down as down while the reports go on, and forgets it
// once they stop.
func TestNeverSeenReportedDown(t *testing.T) {
	agg := NewLiveness(3 * time.Second)
	agg.SetExpected([]string{"cn1", "cn2", "cn3"})
	t0 := time.Unix(1000, 0)
	agg.Seen("cn1", t0, t0)
	got := agg.ExpectedDown()
	slices.Sort(got)
	if !slices.Equal(got, []string{"cn2", "cn3"}) {
		t.Fatalf("ExpectedDown = %v, want [cn2 cn3]", got)
	}

	srv := NewLiveness(3 * time.Second)
	srv.Seen("cn1", t0, t0)
	for _, n := range got {
		if srv.ReportedDown(n, t0) {
			t.Errorf("%s: first report, want not down before", n)
		}
	}
	down := srv.Down()
	slices.Sort(down)
	if up, nd := srv.Counts(); up != 1 || nd != 2 || !slices.Equal(down, []string{"cn2", "cn3"}) {
		t.Fatalf("server: up %d down %d %v, want 1 up, cn2 cn3 down", up, nd, down)
	}
	if !srv.ReportedDown("cn2", t0) {
		t.Error("repeated report: want down before")
	}
	// A report about a node that is up changes nothing.
	if srv.ReportedDown("cn1", t0) {
		t.Error("cn1 is up: want not down before")
	}
	if up, _ := srv.Counts(); up != 1 {
		t.Fatal("a report must not mark a ticking node down")
	}
	// Reports repeated: kept; cn3's reports stop: forgotten after 10×.
	for s := 1; s <= 40; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		srv.Seen("cn1", now, now)
		srv.ReportedDown("cn2", now)
		srv.Sweep(now)
	}
	down = srv.Down()
	if !slices.Equal(down, []string{"cn2"}) {
		t.Fatalf("after 40 s: down %v, want [cn2] (cn3 no longer reported)", down)
	}
	// The node connects at last: up, with its clock offset from its own
	// ticks, not from the report.
	now := t0.Add(41 * time.Second)
	if !srv.Seen("cn2", now.Add(-2*time.Second), now) {
		t.Fatal("first tick of a reported node: want joined")
	}
	for _, st := range srv.Snapshot() {
		if st.Node == "cn2" && (!st.Up || st.ClockOffset != -2*time.Second) {
			t.Fatalf("cn2 after its first tick: %+v, want up, offset -2s", st)
		}
	}
}

// TestLivenessModel drives Liveness with random ticks (by name and by
// NodeRef), lower tiers' down reports, expected-set changes and sweeps,
// and compares it after every step with a plain model of the rules:
// Sweep's verdicts, Counts (kept as running counts) against the snapshot,
// and forgetting. It checks the dense index that Sweep scans, including
// refs to nodes forgotten and seen again.
func TestLivenessModel(t *testing.T) {
	const downAfter = 3 * time.Second
	type node struct {
		up             bool
		seen, reported time.Time
	}
	l := NewLiveness(downAfter)
	model := map[string]*node{}
	expected := map[string]bool{}
	refs := map[string]*NodeRef{}
	rng := rand.New(rand.NewPCG(11, 11))
	now := time.Unix(1_000_000, 0)
	names := make([]string, 60)
	for i := range names {
		names[i] = fmt.Sprintf("cn%02d", i)
	}
	for step := range 20000 {
		now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
		name := names[rng.IntN(len(names))]
		switch op := rng.IntN(100); {
		case op < 55 && rng.IntN(len(names)) < len(names)/3: // a third of the nodes go quiet for long
		case op < 55:
			m := model[name]
			if m == nil {
				m = &node{}
				model[name] = m
			}
			wasUp := m.up
			m.up, m.seen = true, now
			var joined bool
			if rng.IntN(2) == 0 {
				r := refs[name]
				if r == nil {
					ref := l.Ref(name)
					r = &ref
					refs[name] = r
				}
				joined = l.SeenRef(r, now, now)
			} else {
				joined = l.Seen(name, now, now)
			}
			if joined != !wasUp {
				t.Fatalf("step %d: Seen(%s) joined=%v, model was up=%v", step, name, joined, wasUp)
			}
		case op < 65:
			m := model[name]
			want := m != nil && !m.up
			if m == nil {
				m = &node{}
				model[name] = m
			}
			if !m.up {
				m.reported = now
			}
			if got := l.ReportedDown(name, now); got != want {
				t.Fatalf("step %d: ReportedDown(%s) = %v, want %v", step, name, got, want)
			}
		case op < 68:
			var exp []string
			clear(expected)
			for _, n := range names {
				if rng.IntN(4) == 0 {
					exp = append(exp, n)
					expected[n] = true
				}
			}
			l.SetExpected(exp)
		default:
			var want []string
			for n, m := range model {
				last := m.seen
				if m.reported.After(last) {
					last = m.reported
				}
				silent := now.Sub(last)
				if m.up && silent >= downAfter {
					m.up = false
					want = append(want, n)
				}
				if !m.up && !expected[n] && silent >= 10*downAfter {
					delete(model, n)
				}
			}
			got := l.Sweep(now)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Sweep = %v, want %v", step, got, want)
			}
		}
		var up, down int
		snap := l.Snapshot()
		inSnap := map[string]bool{}
		for _, s := range snap {
			inSnap[s.Node] = true
		}
		for n := range model {
			if !inSnap[n] {
				t.Fatalf("step %d: %s forgotten, the model has it", step, n)
			}
		}
		for _, s := range snap {
			if s.Up {
				up++
			} else {
				down++
			}
			if m := model[s.Node]; m != nil && m.up != s.Up {
				t.Fatalf("step %d: %s up=%v, model %v", step, s.Node, s.Up, m.up)
			} else if m == nil && !expected[s.Node] {
				t.Fatalf("step %d: %s kept, the model forgot it", step, s.Node)
			}
		}
		if gu, gd := l.Counts(); gu != up || gd != down {
			t.Fatalf("step %d: Counts = %d/%d, the snapshot says %d/%d", step, gu, gd, up, down)
		}
	}
}

// BenchmarkLiveness: a tick's liveness update by name and by NodeRef, and a
// Sweep over 20,000 nodes all heard from (an aggregator's steady state,
// twice a second), one op each.
func BenchmarkLiveness(b *testing.B) {
	const nodes = 20000
	l := NewLiveness(3 * time.Second)
	names := make([]string, nodes)
	refs := make([]NodeRef, nodes)
	now := time.Now()
	for i := range names {
		names[i] = fmt.Sprintf("cn%05d", i)
		refs[i] = l.Ref(names[i])
		l.SeenRef(&refs[i], now, now)
	}
	b.Run("seen-by-name", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			l.Seen(names[i], now, now)
			i = (i + 7919) % nodes // spread, as ticks of thousands of nodes are
		}
	})
	b.Run("seen-by-ref", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			l.SeenRef(&refs[i], now, now)
			i = (i + 7919) % nodes
		}
	})
	b.Run("sweep", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if down := l.Sweep(now.Add(time.Second)); len(down) != 0 {
				b.Fatal(down)
			}
		}
	})
	b.Run("counts", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if up, _ := l.Counts(); up != nodes {
				b.Fatal(up)
			}
		}
	})
}
