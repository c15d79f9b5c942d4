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

// BenchmarkRuleRound times one evaluation round of alerting rules (in
// groups of 100, each group on its goroutine as the rules engine runs
// them, 1 or 2 queries at once): mix1000 is -rules-count rules, one in
// -rules-wide over every node and the others over one rack of 100 nodes
// each; all100 is 100 rules each over every node. The store holds
// -rules-nodes nodes with 5 minutes of 15 s samples of 7 series each
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
	dir := b.TempDir()
	tick := 0 // each round at a new time, so ALERTS samples never collide
	for _, c := range []struct {
		name             string
		rules, wide, par int
	}{
		{"mix1000/par1", *benchRules, *benchWide, 1}, {"mix1000/par2", *benchRules, *benchWide, 2},
		{"all100/par1", 100, 1, 1}, {"all100/par2", 100, 1, 2},
	} {
		b.Run(c.name, func(b *testing.B) {
			file := writeFile(b, dir, strings.ReplaceAll(c.name, "/", "-")+".yml", benchRuleFile(c.rules, c.wide))
			benchRound(b, e, file, now, &tick, c.par)
		})
	}
}

// benchRuleFile writes n alerting rules in groups of 100, the templates
// in turn: one in wide over every node, the others over one rack of 100
// nodes (node=~"cnRRR..").
func benchRuleFile(n, wide int) string {
	var sb strings.Builder
	sb.WriteString("groups:\n")
	for i := range n {
		if i%100 == 0 {
			fmt.Fprintf(&sb, "- name: g%d\n  rules:\n", i/100)
		}
		sel := ""
		if i%wide != 0 {
			sel = fmt.Sprintf(`node=~"cn%03d.."`, i%(*benchNodes/100))
		}
		tmpl := benchTemplates[(i+i/wide)%len(benchTemplates)]
		fmt.Fprintf(&sb, "  - alert: A%d\n    expr: '%s'\n    for: 1m\n    labels: {severity: warning}\n    annotations: {summary: \"{{ $labels.node }} at {{ $value }}\"}\n",
			i, fmt.Sprintf(tmpl, sel, i/len(benchTemplates)%10))
	}
	return sb.String()
}

// benchRound evaluates the file's groups b.N times, each group on its
// goroutine, par rule queries at once.
func benchRound(b *testing.B, e *env, file string, now time.Time, tick *int, par int) {
	m, err := New(Options{Files: []string{file}, Query: e.api.RuleInstant, Appendable: e.st, Queryable: e.st, MaxConcurrent: par})
	if err != nil {
		b.Fatal(err)
	}
	groups, errs := m.rules.LoadGroups(DefaultInterval, labels.EmptyLabels(), "", nil, false, filepath.Clean(file))
	if errs != nil {
		b.Fatal(errs)
	}
	var walls, cpus []time.Duration
	b.ResetTimer()
	for range b.N {
		*tick++
		ts := now.Add(time.Duration(*tick) * time.Second)
		c0, w0 := cpuTime(), time.Now()
		var wg sync.WaitGroup
		for _, g := range groups {
			wg.Go(func() { g.Eval(context.Background(), ts) })
		}
		wg.Wait()
		walls, cpus = append(walls, time.Since(w0)), append(cpus, cpuTime()-c0)
	}
	b.StopTimer()
	active := 0
	for _, g := range groups {
		for _, r := range g.AlertingRules() {
			if err := r.LastError(); err != nil {
				b.Fatalf("rule %s: %v", r.Name(), err)
			}
			active += len(r.ActiveAlerts())
		}
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	b.ReportMetric(walls[len(walls)/2].Seconds(), "s/round(median)")
	b.ReportMetric(walls[len(walls)-1].Seconds(), "s/round(max)")
	b.ReportMetric(cpus[len(cpus)/2].Seconds(), "cpu-s/round")
	b.ReportMetric(float64(active), "active-alerts")
}
