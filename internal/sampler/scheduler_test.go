package sampler

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// fakePlugin does what its fields say on every Sample.
type fakePlugin struct {
	desc   *metric.Desc
	panics bool
	err    error
	sleep  time.Duration
	calls  []time.Time // tick times it was called with
}

func (p *fakePlugin) Init(Env) error { return nil }

func (p *fakePlugin) Sample(_ context.Context, now time.Time, b *metric.Batch) error {
	p.calls = append(p.calls, now)
	if p.sleep > 0 {
		time.Sleep(p.sleep)
	}
	if p.panics {
		var m map[string]int
		//lint:ignore SA5000 a real runtime panic is the point
		m["boom"]++ // a real runtime panic, not just panic("...")
	}
	if p.desc != nil {
		b.Add(p.desc, float64(len(p.calls)))
	}
	return p.err
}

var quiet = slog.New(slog.DiscardHandler)

func newGroup(t *testing.T, iv time.Duration, plugins map[string]*fakePlugin, order ...string) *Scheduler {
	t.Helper()
	var insts []Instance
	for _, n := range order {
		insts = append(insts, Instance{Name: n, Plugin: plugins[n], Interval: iv})
	}
	s, err := NewScheduler(insts, nil, quiet, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPanicAndErrorsPerPlugin(t *testing.T) {
	ok := &fakePlugin{desc: metric.NewDesc("ok_value", "", metric.Gauge)}
	ps := map[string]*fakePlugin{
		"boom":   {panics: true, desc: metric.NewDesc("never", "", metric.Gauge)},
		"fail":   {err: errors.New("read /proc/x: broken")},
		"absent": {err: ErrNotAvailable},
		"ok":     ok,
	}
	s := newGroup(t, time.Second, ps, "boom", "fail", "absent", "ok")
	if len(s.groups) != 1 {
		t.Fatalf("%d groups, want 1 (same interval and offset)", len(s.groups))
	}
	var b metric.Batch
	for i := 1; i <= 3; i++ {
		s.CollectOnce(context.Background(), time.Unix(int64(i), 0), &b)
		if b.Len() != 1 || b.Samples()[0].Desc != ok.desc || b.Samples()[0].Value != float64(i) {
			t.Fatalf("tick %d: batch %+v, want only ok_value %d", i, b.Samples(), i)
		}
	}
	for name, want := range map[string]uint64{"boom": 3, "fail": 3, "absent": 0, "ok": 0} {
		if got := s.Stats().Plugin(name).Errors.Load(); got != want {
			t.Errorf("%s: errors = %d, want %d", name, got, want)
		}
	}
	if got := s.Stats().Plugin("ok").Samples.Load(); got != 1 {
		t.Errorf("ok: samples = %d, want 1", got)
	}
	if got := s.Stats().Plugin("boom").Samples.Load(); got != 0 {
		t.Errorf("boom: samples = %d, want 0", got)
	}
	if !strings.Contains(s.Stats().Plugin("boom").lastErr, "panic: assignment to entry in nil map") {
		t.Errorf("boom: last error %q does not record the panic", s.Stats().Plugin("boom").lastErr)
	}
}

// TestShutdownIsNotAFailure: a plugin cut short by the context ending
// (the daemon stopping mid-tick) is neither counted nor logged as failing;
// the same error before shutdown is.
func TestShutdownIsNotAFailure(t *testing.T) {
	var logged strings.Builder
	p := &fakePlugin{err: context.Canceled}
	s, err := NewScheduler([]Instance{{Name: "slow", Plugin: p, Interval: time.Second}}, nil,
		slog.New(slog.NewTextHandler(&logged, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b metric.Batch
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.CollectOnce(ctx, time.Unix(1, 0), &b)
	if n := s.Stats().Plugin("slow").Errors.Load(); n != 0 || logged.Len() != 0 {
		t.Fatalf("after shutdown: %d errors, log %q; want none", n, logged.String())
	}
	s.CollectOnce(context.Background(), time.Unix(2, 0), &b)
	if n := s.Stats().Plugin("slow").Errors.Load(); n != 1 || !strings.Contains(logged.String(), "plugin sample failed") {
		t.Fatalf("while running: %d errors, log %q; want 1 and a warning", n, logged.String())
	}
}

// TestPanicWhileRunning drives the real tick loop on a fake clock.
func TestPanicWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := &fakePlugin{desc: metric.NewDesc("ok_value", "", metric.Gauge)}
		boom := &fakePlugin{panics: true}
		insts := []Instance{
			{Name: "boom", Plugin: boom, Interval: 100 * time.Millisecond},
			{Name: "ok", Plugin: ok, Interval: 100 * time.Millisecond},
		}
		var seen []float64
		s, err := NewScheduler(insts, nil, quiet, func(int) func(*metric.Batch) {
			return func(b *metric.Batch) {
				for _, smp := range b.Samples() {
					if smp.Desc == ok.desc {
						seen = append(seen, smp.Value)
					}
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if st.Ticks.Load() < 1 || len(seen) < 1 {
			t.Fatalf("ticks = %d, ok values seen = %d; want >= 1", st.Ticks.Load(), len(seen))
		}
		if got := st.Plugin("boom").Errors.Load(); got != uint64(len(boom.calls)) || got < 1 {
			t.Errorf("boom errors = %d, calls = %d; want equal and >= 1", got, len(boom.calls))
		}
		if got := st.Plugin("ok").Errors.Load(); got != 0 {
			t.Errorf("ok errors = %d, want 0", got)
		}
		if !st.Plugin("boom").LastFail.Load() || st.Plugin("ok").LastFail.Load() {
			t.Errorf("LastFail: boom %v, ok %v; want true, false", st.Plugin("boom").LastFail.Load(), st.Plugin("ok").LastFail.Load())
		}
		if len(seen) != len(ok.calls) {
			t.Errorf("ok produced %d values in %d ticks", len(seen), len(ok.calls))
		}
	})
}

func TestNextTick(t *testing.T) {
	ms := time.Millisecond
	at := func(d time.Duration) time.Time { return time.Unix(0, int64(d)) }
	for _, tc := range []struct {
		now              time.Duration // since the epoch
		interval, offset time.Duration
		want             time.Duration
	}{
		{1500 * ms, time.Second, 0, 2000 * ms},
		{2000 * ms, time.Second, 0, 3000 * ms}, // strictly after now
		{1999 * ms, time.Second, 0, 2000 * ms},
		{0, time.Second, 0, 1000 * ms},
		{1300 * ms, time.Second, 250 * ms, 2250 * ms},
		{1200 * ms, time.Second, 250 * ms, 1250 * ms},
		{1250 * ms, time.Second, 250 * ms, 2250 * ms},
		{105 * ms, 20 * ms, 7 * ms, 107 * ms},
		{-1500 * ms, time.Second, 0, -1000 * ms},
		{-2000 * ms, time.Second, 0, -1000 * ms},
		{-1, time.Second, 0, 0},
		{-500 * ms, time.Second, 200 * ms, 200 * ms},
		{-900 * ms, time.Second, 200 * ms, -800 * ms},
		{-800 * ms, time.Second, 200 * ms, 200 * ms},
	} {
		got := NextTick(at(tc.now), tc.interval, tc.offset)
		if !got.Equal(at(tc.want)) {
			t.Errorf("NextTick(%v, %v, %v) = %v, want %v", tc.now, tc.interval, tc.offset,
				time.Duration(got.UnixNano()), tc.want)
		}
	}

	// Properties on random inputs: after now, within one interval, aligned.
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		iv := time.Duration(1 + r.Int64N(int64(time.Hour)))
		off := time.Duration(r.Int64N(int64(iv)))
		now := time.Unix(0, r.Int64N(1<<62)-1<<61)
		got := NextTick(now, iv, off)
		d := got.Sub(now)
		if d <= 0 || d > iv {
			t.Fatalf("NextTick(%v, %v, %v) = %v: %v after now", now.UnixNano(), iv, off, got.UnixNano(), d)
		}
		if m := (got.UnixNano() - int64(off)) % int64(iv); m != 0 {
			t.Fatalf("NextTick(%v, %v, %v) = %v: not aligned (remainder %d)", now.UnixNano(), iv, off, got.UnixNano(), m)
		}
	}
}

// TestOverrun: a plugin slower than its interval makes the scheduler skip
// ticks and count them, not queue them.
func TestOverrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const iv = 20 * time.Millisecond
		slow := &fakePlugin{sleep: 50 * time.Millisecond}
		s, err := NewScheduler([]Instance{{Name: "slow", Plugin: slow, Interval: iv}}, nil, quiet, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if st.Overruns.Load() < 1 || st.Ticks.Load() < 1 {
			t.Fatalf("overruns = %d, ticks = %d; want both >= 1", st.Overruns.Load(), st.Ticks.Load())
		}
		if uint64(len(slow.calls)) != st.Ticks.Load() {
			t.Errorf("calls = %d, ticks = %d", len(slow.calls), st.Ticks.Load())
		}
		for i, c := range slow.calls {
			if c.UnixNano()%int64(iv) != 0 {
				t.Errorf("tick %v not aligned to %v", c, iv)
			}
			// A queued tick would come one interval after the previous.
			if i > 0 && c.Sub(slow.calls[i-1]) < 2*iv {
				t.Errorf("tick %d only %v after the previous: queued, not skipped", i, c.Sub(slow.calls[i-1]))
			}
		}
	})
}

func TestNewSchedulerGroups(t *testing.T) {
	p := func() *fakePlugin { return &fakePlugin{} }
	var asked []int
	s, err := NewScheduler([]Instance{
		{Name: "a", Plugin: p(), Interval: time.Second},
		{Name: "b", Plugin: p(), Interval: time.Second, Offset: 1500 * time.Millisecond}, // same as 500ms
		{Name: "c", Plugin: p(), Interval: time.Second, Offset: 500 * time.Millisecond},
		{Name: "d", Plugin: p(), Interval: 10 * time.Second},
	}, nil, quiet, func(g int) func(*metric.Batch) {
		asked = append(asked, g)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.groups) != 3 || s.Groups() != 3 {
		t.Errorf("%d groups, want 3", len(s.groups))
	}
	// The sink is asked once per group, for each group's own index.
	if !slices.Equal(asked, []int{0, 1, 2}) {
		t.Errorf("sink asked for groups %v, want [0 1 2]", asked)
	}
	if len(s.Stats().Plugins) != 4 {
		t.Errorf("%d plugin stats, want 4", len(s.Stats().Plugins))
	}
	if _, err := NewScheduler([]Instance{{Name: "z", Plugin: p()}}, nil, quiet, nil); err == nil {
		t.Error("zero interval accepted")
	}
}
