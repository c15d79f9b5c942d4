package report

import (
	"math"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

// Straggler detection. At each step, a node is below its peers when its
// value is under median − max(3 × 1.4826 × MAD, 20 % of the median), over
// the job's nodes present at that step:
//   - the median and the MAD (median absolute deviation) are robust: up to
//     half the nodes can misbehave without moving them, so the straggler
//     does not widen the spread it is judged against, as it would a mean
//     and standard deviation; 1.4826 × MAD estimates σ for normal noise,
//     so 3 of them is the usual 3σ;
//   - the 20 % floor keeps a tightly synchronised job (MPI ranks in lock
//     step, MAD near 0) from flagging a node a few percent slower;
//   - steps where the median itself is idle (under stragglerFloors) are not
//     judged: every node at 0 is no one's fault.
//
// A node is a straggler when it is below for at least 20 % of the job's
// run and at least 2 minutes in total: a late start, a checkpoint or a
// garbage-collection pause on one node lasts less, and the rate windows
// already smooth a step's worth of noise. At least 3 nodes are needed: with
// two, each is as far from the median as the other.
const (
	stragglerMinNodes    = 3
	stragglerMADs        = 3 * 1.4826
	stragglerMinDrop     = 0.20
	stragglerMinFraction = 0.20
	stragglerMinTime     = 2 * time.Minute
)

// stragglerFloors are the metrics judged and the median below which a
// step is idle: 0.05 cores, 1 MiB/s.
var stragglerFloors = []struct {
	metric string
	floor  float64
}{
	{MetricCPU, 0.05},
	{MetricRead, 1 << 20},
	{MetricWrite, 1 << 20},
}

// findStragglers returns the verdicts, by node then metric.
func findStragglers(id string, series map[string]map[string][]Point, step, span time.Duration) []Straggler {
	var out []Straggler
	need := max(time.Duration(stragglerMinFraction*float64(span)), stragglerMinTime)
	for _, m := range stragglerFloors {
		byNode := series[m.metric]
		if len(byNode) < stragglerMinNodes {
			continue
		}
		type obs struct {
			node string
			v    float64
		}
		at := map[float64][]obs{}
		for n, pts := range byNode {
			for _, p := range pts {
				at[p[0]] = append(at[p[0]], obs{n, p[1]})
			}
		}
		type tally struct {
			steps           int
			sumNode, sumMed float64
		}
		tallies := map[string]*tally{}
		vs, dev := []float64{}, []float64{}
		for _, os := range at {
			if len(os) < stragglerMinNodes {
				continue
			}
			vs = vs[:0]
			for _, o := range os {
				vs = append(vs, o.v)
			}
			slices.Sort(vs)
			med := quantile(vs, 0.5)
			if med < m.floor {
				continue
			}
			dev = dev[:0]
			for _, v := range vs {
				dev = append(dev, math.Abs(v-med))
			}
			slices.Sort(dev)
			thr := med - max(stragglerMADs*quantile(dev, 0.5), stragglerMinDrop*med)
			for _, o := range os {
				if o.v >= thr {
					continue
				}
				t := tallies[o.node]
				if t == nil {
					t = &tally{}
					tallies[o.node] = t
				}
				t.steps++
				t.sumNode += o.v
				t.sumMed += med
			}
		}
		for n, t := range tallies {
			flagged := time.Duration(t.steps) * step
			if flagged < need || t.sumMed <= 0 {
				continue
			}
			out = append(out, Straggler{
				Job: id, Node: n, Metric: m.metric,
				Deficit:  1 - t.sumNode/t.sumMed,
				Flagged:  jobs.Duration(flagged),
				Fraction: min(1, flagged.Seconds()/span.Seconds()),
			})
		}
	}
	slices.SortFunc(out, func(a, b Straggler) int {
		if c := compareNodes(a.Node, b.Node); c != 0 {
			return c
		}
		return metricOrder(a.Metric) - metricOrder(b.Metric)
	})
	return out
}

func metricOrder(m string) int {
	for i, f := range stragglerFloors {
		if f.metric == m {
			return i
		}
	}
	return len(stragglerFloors)
}
