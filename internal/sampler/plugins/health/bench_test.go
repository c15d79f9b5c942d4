package health

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/health"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

// bench20 are 20 built-in checks (no program run) on the real root, as a
// node would configure them.
func bench20(tb testing.TB) *Config {
	host, err := os.Hostname()
	if err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	add := func(typ string, c health.CheckConfig) {
		c.Name, c.Type = fmt.Sprintf("%s_%d", typ, len(cfg.Check)), typ
		cfg.Check = append(cfg.Check, c)
	}
	for _, p := range []string{"/", "/proc", "/sys", "/dev"} {
		add("mount", health.CheckConfig{Path: p})
	}
	add("writable", health.CheckConfig{Path: os.TempDir()})
	add("writable", health.CheckConfig{Path: "/tmp"})
	for _, p := range []string{"/", "/tmp", os.TempDir()} {
		add("free_space", health.CheckConfig{Path: p, MinFree: "1%"})
	}
	// Processes that run here (a healthy node's checks pass): pid 1,
	// this process and its parent.
	for _, pid := range []int{1, os.Getpid(), os.Getppid()} {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			tb.Fatal(err)
		}
		add("process", health.CheckConfig{Process: strings.TrimSpace(string(comm))})
	}
	add("hostname", health.CheckConfig{Expected: host})
	add("hostname", health.CheckConfig{Expected: "other"})
	add("kernel", health.CheckConfig{Expected: "*"})
	add("kernel", health.CheckConfig{Expected: "2.6.*"})
	add("memory", health.CheckConfig{Expected: "256GiB"})
	add("memory", health.CheckConfig{Expected: "16GiB", Tolerance: "50%"})
	add("cpus", health.CheckConfig{Expected: "2"})
	add("cpus", health.CheckConfig{Expected: "128"})
	if len(cfg.Check) != 20 {
		tb.Fatalf("%d checks", len(cfg.Check))
	}
	return cfg
}

func newBench(b *testing.B) *Plugin {
	p := New(bench20(b))
	if err := p.Init(sampler.Env{FS: kernfs.NewFS("/")}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	<-p.runner.FirstRound()
	return p
}

// BenchmarkRound20: one round of the 20 checks and the tick after it,
// which renders the new results: the work of one check interval.
func BenchmarkRound20(b *testing.B) {
	p := newBench(b)
	ctx := context.Background()
	var batch metric.Batch
	b.ReportAllocs()
	for b.Loop() {
		p.runner.RunAll(ctx)
		batch.Reset(time.Time{})
		_ = p.Sample(ctx, time.Time{}, &batch)
	}
}

// BenchmarkTick20: a steady-state tick with 20 checks (results unchanged).
func BenchmarkTick20(b *testing.B) {
	p := newBench(b)
	ctx := context.Background()
	var batch metric.Batch
	_ = p.Sample(ctx, time.Time{}, &batch)
	b.ReportAllocs()
	for b.Loop() {
		batch.Reset(time.Time{})
		_ = p.Sample(ctx, time.Time{}, &batch)
	}
}

// BenchmarkRound20Missing: the same round with one process check whose
// process does not run, which scans /proc every round.
func BenchmarkRound20Missing(b *testing.B) {
	cfg := bench20(b)
	cfg.Check[11].Process = "no-such-daemon"
	p := New(cfg)
	if err := p.Init(sampler.Env{FS: kernfs.NewFS("/")}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	<-p.runner.FirstRound()
	ctx := context.Background()
	var batch metric.Batch
	b.ReportAllocs()
	for b.Loop() {
		p.runner.RunAll(ctx)
		batch.Reset(time.Time{})
		_ = p.Sample(ctx, time.Time{}, &batch)
	}
	b.ReportMetric(float64(countProcs(b)), "procs")
}

func countProcs(tb testing.TB) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if c := e.Name()[0]; c >= '0' && c <= '9' {
			n++
		}
	}
	return n
}
