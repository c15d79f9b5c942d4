package alerting

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/vigil-hpc/vigil/internal/query"
)

var (
	benchNodes = flag.Int("rules-nodes", 20000, "simulated nodes of BenchmarkRuleRound")
	benchRules = flag.Int("rules-count", 1000, "alerting rules of BenchmarkRuleRound")
	benchWide  = flag.Int("rules-wide", 10, "one in this many rules of BenchmarkRuleRound reads every node; the others one rack of 100 (1: every rule reads every node)")
)

// benchTemplates are alerting rules as a site writes them (each used with
// its own threshold): node down, load, memory, CPU idle, file system.
// %[1]s is a matcher choosing the nodes (or none), %[2]d a digit.
var benchTemplates = []string{
	`up{%[1]s} < 0.5%[2]d`,
	`node_load1{%[1]s} > 5%[2]d`,
	`node_memory_MemAvailable_bytes{%[1]s} / node_memory_MemTotal_bytes{%[1]s} < 0.0%[2]d`,
	`rate(node_cpu_seconds_total{mode="idle",%[1]s}[5m]) < 0.%[2]d`,
	`node_filesystem_avail_bytes{mountpoint="/",%[1]s} / node_filesystem_size_bytes{mountpoint="/",%[1]s} < 0.0%[2]d`,
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRuleRound times one evaluation round of -rules-count alerting
// rules, one in -rules-wide over every node and the others over one rack
// of 100 nodes each (in groups of 100, each group on its goroutine as the rules
// engine runs them, the queries under the Manager's concurrency bound)
// over -rules-nodes nodes with 5 minutes of 15 s samples of 7 series each
// (up, load, memory, CPU idle counter, root file system): wall time per
// round (ns/op, must stay under the 15 s interval) and CPU seconds per
// round. Every 5000th node is unwell (down, loaded, out of memory, idle
// CPU, full disk), so most rules have a few alerts pending.
func BenchmarkRuleRound(b *testing.B) {
	e := newEnv(b, "", query.Options{})
	now := time.Now()
	start := now.Add(-5 * time.Minute)
	names := make([]string, *benchNodes)
	for i := range names {
		names[i] = fmt.Sprintf("cn%05d", i)
	}
	for ts := start; !ts.After(now); ts = ts.Add(15 * time.Second) {
		app := e.st.Appender(context.Background())
		k := float64(ts.Sub(start) / time.Second)
		for i, n := range names {
			ok := 1.0
			if i%5000 == 0 {
				ok = 0
			}
			for _, s := range []struct {
				ls []string
				v  float64
			}{
				{[]string{"__name__", "up", "node", n}, ok},
				{[]string{"__name__", "node_load1", "node", n}, 100 - 99*ok},
				{[]string{"__name__", "node_memory_MemAvailable_bytes", "node", n}, (1 + 127*ok) * (1 << 30)},
				{[]string{"__name__", "node_memory_MemTotal_bytes", "node", n}, 256 << 30},
				{[]string{"__name__", "node_cpu_seconds_total", "mode", "idle", "node", n}, k * ok},
				{[]string{"__name__", "node_filesystem_avail_bytes", "mountpoint", "/", "node", n}, (1 + 49*ok) * (1 << 20)},
				{[]string{"__name__", "node_filesystem_size_bytes", "mountpoint", "/", "node", n}, 100 << 20},
			} {
				if _, err := app.Append(0, labels.FromStrings(s.ls...), ts.UnixMilli(), s.v); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := app.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	var sb strings.Builder
	for i := range *benchRules {
		if i%100 == 0 {
			fmt.Fprintf(&sb, "- name: g%d\n  rules:\n", i/100)
		}
		sel := ""
		if i%*benchWide != 0 { // a rack: cnRRRxx
			sel = fmt.Sprintf(`node=~"cn%03d.."`, i%(*benchNodes/100))
		}
		fmt.Fprintf(&sb, "  - alert: A%d\n    expr: '%s'\n    for: 1m\n    labels: {severity: warning}\n    annotations: {summary: \"{{ $labels.node }} at {{ $value }}\"}\n",
			i, fmt.Sprintf(benchTemplates[i%len(benchTemplates)], sel, i/len(benchTemplates)%10))
	}
	file := writeFile(b, b.TempDir(), "bench.yml", "groups:\n"+sb.String())
	m, err := New(Options{Files: []string{file}, Query: e.api.RuleInstant, Appendable: e.st, Queryable: e.st})
	if err != nil {
		b.Fatal(err)
	}
	groups, errs := m.rules.LoadGroups(DefaultInterval, labels.EmptyLabels(), "", nil, false, filepath.Clean(file))
	if errs != nil {
		b.Fatal(errs)
	}
	var walls, cpus []time.Duration
	b.ResetTimer()
	for i := range b.N {
		ts := now.Add(time.Duration(i) * time.Second)
		c0, w0 := cpuTime(), time.Now()
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Go(func() { g.Eval(context.Background(), ts) })
		}
		wg.Wait()
		walls, cpus = append(walls, time.Since(w0)), append(cpus, cpuTime()-c0)
	}
	b.StopTimer()
	firing := 0
	for _, g := range groups {
		for _, r := range g.AlertingRules() {
			if err := r.LastError(); err != nil {
				b.Fatalf("rule %s: %v", r.Name(), err)
			}
			firing += len(r.ActiveAlerts())
		}
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	b.ReportMetric(walls[len(walls)/2].Seconds(), "s/round(median)")
	b.ReportMetric(walls[len(walls)-1].Seconds(), "s/round(max)")
	b.ReportMetric(cpus[len(cpus)/2].Seconds(), "cpu-s/round")
	b.ReportMetric(float64(firing), "active-alerts")
}
