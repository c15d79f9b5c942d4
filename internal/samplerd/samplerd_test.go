package samplerd

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

const fixture = "../../cmd/vigil/testdata/node1"

func build(t *testing.T, plugins []string) *sampler.Scheduler {
	t.Helper()
	o := &Options{Config: config.Defaults(), Node: "test", Root: fixture, Interval: time.Second, Plugins: plugins}
	s, err := Build(o, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The target: a steady-state tick of all default plugins
// allocates nothing.
func TestZeroAllocsDefaultPlugins(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	s := build(t, sampler.DefaultNames())
	var b metric.Batch
	now := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		now = now.Add(time.Second)
		s.CollectOnce(ctx, now, &b)
	}
	if b.Len() < 300 {
		t.Fatalf("only %d values from the default plugins on the fixture", b.Len())
	}
	allocs := testing.AllocsPerRun(50, func() {
		now = now.Add(time.Second)
		s.CollectOnce(ctx, now, &b)
	})
	if allocs != 0 {
		t.Errorf("allocations per tick of %v = %v, want 0", sampler.DefaultNames(), allocs)
	}
	for _, ps := range s.Stats().Plugins {
		if n := ps.Errors.Load(); n != 0 {
			t.Errorf("plugin %s: %d errors on the fixture", ps.Name, n)
		}
	}
}

// BenchmarkTick is one tick of every default plugin on the fixture tree.
func BenchmarkTick(b *testing.B) {
	t := &testing.T{}
	s := build(t, sampler.DefaultNames())
	var batch metric.Batch
	now := time.Unix(1_700_000_000, 0)
	ctx := context.Background()
	for i := 0; i < 3; i++ { // first ticks build descriptors and buffers
		now = now.Add(time.Second)
		s.CollectOnce(ctx, now, &batch)
	}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		s.CollectOnce(ctx, now, &batch)
	}
	b.ReportMetric(float64(batch.Len()), "values/tick")
}

func TestZeroAllocsEachPlugin(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for _, p := range sampler.DefaultNames() {
		t.Run(p, func(t *testing.T) {
			s := build(t, []string{p})
			var b metric.Batch
			now := time.Unix(1_700_000_000, 0)
			for i := 0; i < 5; i++ {
				now = now.Add(time.Second)
				s.CollectOnce(context.Background(), now, &b)
			}
			if a := testing.AllocsPerRun(50, func() {
				now = now.Add(time.Second)
				s.CollectOnce(context.Background(), now, &b)
			}); a != 0 {
				t.Errorf("%s: %v allocs per tick", p, a)
			}
		})
	}
}

// TestMinInterval: procs samples at the sampler's interval but at most
// once a second, so a 10 Hz sampler runs it in a group of its own, unless
// its table sets an interval.
func TestMinInterval(t *testing.T) {
	f10, err := config.Parse("procs10hz.toml", []byte("[plugins.procs]\ninterval = \"100ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cfg    *config.File
		iv     time.Duration
		groups int
	}{
		{"1 Hz", config.Defaults(), time.Second, 1},
		{"10 Hz", config.Defaults(), 100 * time.Millisecond, 2},
		{"0.1 Hz", config.Defaults(), 10 * time.Second, 1},
		{"10 Hz, procs set to 10 Hz", f10, 100 * time.Millisecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{Config: tc.cfg, Node: "test", Root: fixture, Interval: tc.iv, Plugins: []string{"load", "procs"}}
			s, err := Build(o, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Groups() != tc.groups {
				t.Errorf("%d groups, want %d", s.Groups(), tc.groups)
			}
		})
	}
	reg, _ := sampler.Lookup("procs")
	if got := reg.Interval(&sampler.Common{}, 100*time.Millisecond); got != time.Second {
		t.Errorf("procs at a 100ms sampler: %v, want 1s", got)
	}
	if got := reg.Interval(&sampler.Common{}, 5*time.Second); got != 5*time.Second {
		t.Errorf("procs at a 5s sampler: %v, want 5s", got)
	}
}
