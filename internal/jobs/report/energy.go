package report

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

// Energy is the job's share of its nodes' energy (kept in its Summary).
type Energy = jobs.Energy

// NodeEnergy is one node's part.
type NodeEnergy = jobs.NodeEnergy

// energySources are tried in order for each node: the first that has
// series for the node gives its energy. RAPL leaves out the duplicate
// intel-rapl-mmio view of the packages, and psys (which holds them).
var energySources = []struct {
	name, expr string
	power      bool // a mean power in W, times the run's seconds
}{
	{"rapl", `sum by (node) (increase({__name__=~"node_rapl_(package|dram)_joules_total",path!~".*mmio.*",%s}[%s]))`, false},
	{"hwmon_energy", `sum by (node) (increase(node_hwmon_energy_joule_total{%s}[%s]))`, false},
	{"hwmon_power", `sum by (node) (avg_over_time(node_hwmon_power_average_watt{%s}[%s]))`, true},
	{"hwmon_power", `sum by (node) (avg_over_time(node_hwmon_power_watt{%s}[%s]))`, true},
}

// nodeChunk bounds the node names in one query's matcher.
const nodeChunk = 200

// energyFromStore computes the job's energy from its nodes' power series,
// nil when none of its nodes has any. cpus is the job's CPUs by node.
func energyFromStore(ctx context.Context, q Querier, id string, nodes []string, cpus map[string]float64, start, end time.Time, step time.Duration) (*Energy, error) {
	span := end.Sub(start)
	if len(nodes) == 0 || span < time.Second {
		return nil, nil
	}
	byNode := map[string]*NodeEnergy{}
	total := map[string]float64{} // the node's CPUs
	for lo := 0; lo < len(nodes); lo += nodeChunk {
		chunk := nodes[lo:min(lo+nodeChunk, len(nodes))]
		match := nodeMatcher(chunk)
		for _, src := range energySources {
			expr := fmt.Sprintf(src.expr, match, promDur(span))
			if src.power {
				expr = fmt.Sprintf("%s * %g", expr, span.Seconds())
			}
			m, err := q.Range(ctx, expr, end, end, step)
			if err != nil {
				return nil, fmt.Errorf("job %s: node energy (%s): %w", id, src.name, err)
			}
			for _, s := range m {
				n := nodeOf(s)
				if n == "" || byNode[n] != nil || len(s.Floats) == 0 {
					continue
				}
				v := s.Floats[len(s.Floats)-1].F
				if !finite(v) || v < 0 {
					continue
				}
				byNode[n] = &NodeEnergy{Node: n, NodeJoules: v, Source: src.name}
			}
		}
		m, err := q.Range(ctx, fmt.Sprintf(`count by (node) (last_over_time(node_cpu_seconds_total{mode="idle",%s}[10m]))`, match), end, end, step)
		if err != nil {
			return nil, fmt.Errorf("job %s: its nodes' CPUs: %w", id, err)
		}
		for _, s := range m {
			if len(s.Floats) > 0 {
				total[nodeOf(s)] = s.Floats[len(s.Floats)-1].F
			}
		}
	}
	if len(byNode) == 0 {
		return nil, nil
	}
	e := &Energy{}
	for _, n := range nodes {
		ne := byNode[n]
		if ne == nil {
			e.Missing = append(e.Missing, n)
			continue
		}
		ne.Share = CPUShare(cpus[n], total[n])
		ne.Joules = ne.NodeJoules * ne.Share
		e.Shared = e.Shared || ne.Share < 1
		e.Joules += ne.Joules
		e.NodeJoules += ne.NodeJoules
		e.Nodes = append(e.Nodes, *ne)
	}
	slices.SortFunc(e.Nodes, func(a, b NodeEnergy) int { return compareNodes(a.Node, b.Node) })
	return e, nil
}

// CPUShare is the part of a node's energy a job gets: its CPUs over the
// node's, 1 when either is unknown or the job has them all.
func CPUShare(jobCPUs, nodeCPUs float64) float64 {
	if jobCPUs <= 0 || nodeCPUs <= 0 || jobCPUs >= nodeCPUs {
		return 1
	}
	return jobCPUs / nodeCPUs
}

// nodeMatcher is a node=~"a|b" matcher for the names.
func nodeMatcher(nodes []string) string {
	quoted := make([]string, len(nodes))
	for i, n := range nodes {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return fmt.Sprintf(`node=~%q`, strings.Join(quoted, "|"))
}

// energyNotes says how the energy was got, for the report's notes.
func energyNotes(e *Energy) []string {
	if e == nil {
		return nil
	}
	nodes := "nodes"
	if len(e.Nodes) == 1 {
		nodes = "node"
	}
	out := []string{fmt.Sprintf("energy: the job used %s (%.2f kWh) on %d %s", joules(e.Joules), e.Joules/3.6e6, len(e.Nodes), nodes)}
	if e.Shared {
		out = append(out, "energy: some nodes ran other jobs too; each such node's energy is split by this job's share of its CPUs (an estimate: power does not follow CPUs exactly)")
	}
	srcs := map[string]bool{}
	for _, n := range e.Nodes {
		srcs[n.Source] = true
	}
	if srcs["rapl"] {
		out = append(out, "energy: RAPL measures the CPU packages and memory only, not GPUs, disks, fans or power-supply losses")
	}
	if n := len(e.Missing) + e.MissingFolded; n > 0 {
		out = append(out, fmt.Sprintf("energy: no power series from %d of the job's nodes (%s); their energy is not counted", n, list(e.Missing)))
	}
	return out
}

// writeEnergy is the energy block of the text report.
func writeEnergy(b *strings.Builder, e *Energy, elapsed time.Duration) {
	mean := ""
	if elapsed > 0 {
		mean = fmt.Sprintf(", mean %s over the run", watts(e.Joules/elapsed.Seconds()))
	}
	fmt.Fprintf(b, "  Job %s (%.2f kWh)%s\n", joules(e.Joules), e.Joules/3.6e6, mean)
	if e.Shared {
		fmt.Fprintf(b, "  Shared nodes: the node's energy is split by the job's share of its CPUs\n")
	}
	fmt.Fprintf(b, "  %-16s %6s %12s %12s  %s\n", "node", "share", "job", "node", "source")
	for _, n := range e.Nodes {
		fmt.Fprintf(b, "  %-16s %6s %12s %12s  %s\n", n.Node, pct(n.Share), joules(n.Joules), joules(n.NodeJoules), n.Source)
	}
	if e.Folded > 0 {
		fmt.Fprintf(b, "  (%d more nodes, in the totals, not kept in the summary)\n", e.Folded)
	}
}

func joules(j float64) string {
	switch {
	case j >= 1e9:
		return fmt.Sprintf("%.1f GJ", j/1e9)
	case j >= 1e6:
		return fmt.Sprintf("%.1f MJ", j/1e6)
	case j >= 1e3:
		return fmt.Sprintf("%.1f kJ", j/1e3)
	}
	return fmt.Sprintf("%.0f J", j)
}

func watts(w float64) string {
	if w >= 1e3 {
		return fmt.Sprintf("%.2f kW", w/1e3)
	}
	return fmt.Sprintf("%.0f W", w)
}

// jobEnergy is energyFromStore for the nodes fromStore found, with the
// job's CPUs on each from the jobs plugin.
func jobEnergy(ctx context.Context, q Querier, r *Report, per map[string]*nodeAcc, start, end time.Time, step time.Duration) (*Energy, error) {
	nodes := make([]string, 0, len(per))
	cpus := make(map[string]float64, len(per))
	for n, a := range per {
		nodes = append(nodes, n)
		cpus[n] = a.cpus
	}
	slices.SortFunc(nodes, compareNodes)
	return energyFromStore(ctx, q, r.Job.ID, nodes, cpus, start, end, step)
}

// summaryEnergy is e bounded for the job's Summary: at most
// jobs.MaxEnergyNodes nodes (the largest parts) and missing names.
func summaryEnergy(e *Energy) *Energy {
	if e == nil {
		return nil
	}
	c := *e
	if len(e.Nodes) > jobs.MaxEnergyNodes {
		big := slices.Clone(e.Nodes)
		slices.SortStableFunc(big, func(a, b NodeEnergy) int { return cmp.Compare(b.Joules, a.Joules) })
		c.Nodes = big[:jobs.MaxEnergyNodes]
		slices.SortFunc(c.Nodes, func(a, b NodeEnergy) int { return compareNodes(a.Node, b.Node) })
		c.Folded += len(e.Nodes) - jobs.MaxEnergyNodes
	} else {
		c.Nodes = slices.Clone(e.Nodes)
	}
	if len(e.Missing) > jobs.MaxEnergyNodes {
		c.Missing = slices.Clone(e.Missing[:jobs.MaxEnergyNodes])
		c.MissingFolded += len(e.Missing) - jobs.MaxEnergyNodes
	}
	return &c
}
