package grafanacheck

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Outcome is what a panel shows.
type Outcome string

const (
	Data  Outcome = "data"  // at least one series with a value
	Empty Outcome = "empty" // "No data"
	Error Outcome = "error" // a query failed
)

// TargetResult is the replay of one query.
type TargetResult struct {
	Target
	Query   string // expanded
	Outcome Outcome
	Err     string
	// At is the query evaluated at Env.To, whatever the panel's kind, for
	// comparing values.
	At []Series
}

// PanelResult is the replay of one panel.
type PanelResult struct {
	Panel
	Outcome Outcome
	Targets []TargetResult
}

// Vars resolves the dashboard's query variables in order, each from the
// label_values query with the earlier ones substituted, and picks the
// first value after sorting, as Grafana does on load for a variable
// without a saved current value. A variable without values becomes "",
// as in Grafana, whose queries then match every target.
func Vars(ctx context.Context, c *Client, d *Dashboard, env Env) (vars map[string]string, options map[string][]string, err error) {
	vars, options = map[string]string{}, map[string][]string{}
	for _, v := range d.Vars {
		if v.Type != "query" {
			continue
		}
		q, err := env.Expand(v.Query, vars, env.ScrapeInterval)
		if err != nil {
			return nil, nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		sel, label, err := labelValuesCall(q)
		if err != nil {
			return nil, nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		vals, err := c.LabelValues(ctx, label, sel, env.From, env.To)
		if err != nil {
			return nil, nil, fmt.Errorf("variable %s: %s: %w", v.Name, q, err)
		}
		if v.Sort == 2 || v.Sort == 4 || v.Sort == 6 { // descending
			sort.Sort(sort.Reverse(sort.StringSlice(vals)))
		}
		options[v.Name] = vals
		vars[v.Name] = ""
		if len(vals) > 0 {
			vars[v.Name] = vals[0]
		}
	}
	return vars, options, nil
}

// Replay runs every visible query of d with vars, as range queries over
// env's range, instant queries at its end, or both, as each asks.
func Replay(ctx context.Context, c *Client, d *Dashboard, env Env, vars map[string]string) []PanelResult {
	var out []PanelResult
	for _, p := range d.Panels {
		pr := PanelResult{Panel: p, Outcome: Empty}
		for _, t := range p.Targets {
			if t.Hide {
				continue
			}
			tr := replayTarget(ctx, c, p, t, env, vars)
			switch {
			case tr.Outcome == Error:
				pr.Outcome = Error
			case tr.Outcome == Data && pr.Outcome != Error:
				pr.Outcome = Data
			}
			pr.Targets = append(pr.Targets, tr)
		}
		out = append(out, pr)
	}
	return out
}

func replayTarget(ctx context.Context, c *Client, p Panel, t Target, env Env, vars map[string]string) TargetResult {
	tr := TargetResult{Target: t, Outcome: Empty}
	fail := func(err error) TargetResult {
		tr.Outcome, tr.Err = Error, err.Error()
		return tr
	}
	iv, err := env.Interval(p, t)
	if err != nil {
		return fail(err)
	}
	if tr.Query, err = env.Expand(t.Expr, vars, iv); err != nil {
		return fail(err)
	}
	var got []Series
	if t.Range {
		// Grafana aligns the range to multiples of the step.
		start := time.UnixMilli(env.From.UnixMilli() / iv.Milliseconds() * iv.Milliseconds())
		end := time.UnixMilli(env.To.UnixMilli() / iv.Milliseconds() * iv.Milliseconds())
		s, err := c.Range(ctx, tr.Query, start, end, iv)
		if err != nil {
			return fail(err)
		}
		got = append(got, s...)
	}
	at, err := c.Instant(ctx, tr.Query, env.To)
	if err != nil {
		return fail(err)
	}
	tr.At = at
	if t.Instant {
		got = append(got, at...)
	}
	for _, s := range got {
		if len(s.Points) > 0 {
			tr.Outcome = Data
		}
	}
	return tr
}

// Key names a result series for matching across servers: its labels
// without the target's identity (job, instance, and node where it is the
// host's name), which differ between Vigil and a Prometheus scrape.
func Key(ls map[string]string) string {
	var parts []string
	for k, v := range ls {
		if k == "job" || k == "instance" || k == "node" && v == ls["instance"] {
			continue
		}
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// Band is the range of values a server shows for one series around an
// instant: the smallest and largest number, and whether it was NaN (0/0
// of a ratio of rates with no events) at some point.
type Band struct {
	Min, Max float64
	Numbers  int
	NaN      bool
}

// Bands evaluates expr on c every step from t-half to t+half and returns
// each series' band. Two servers that sample the same source a moment
// apart show overlapping bands.
func Bands(ctx context.Context, c *Client, expr string, t time.Time, half, step time.Duration) (map[string]Band, error) {
	ss, err := c.Range(ctx, expr, t.Add(-half), t.Add(half), step)
	if err != nil {
		return nil, err
	}
	out := map[string]Band{}
	for _, s := range ss {
		b := Band{Min: math.Inf(1), Max: math.Inf(-1)}
		for _, p := range s.Points {
			if math.IsNaN(p.V) {
				b.NaN = true
				continue
			}
			b.Min, b.Max = min(b.Min, p.V), max(b.Max, p.V)
			b.Numbers++
		}
		out[Key(s.Labels)] = b
	}
	return out, nil
}

// Overlaps reports whether a and b share a value, each widened by rel of
// the larger magnitude and by abs; bands that were both NaN at some point
// overlap too.
func (a Band) Overlaps(b Band, rel, abs float64) bool {
	if a.NaN && b.NaN {
		return true
	}
	if a.Numbers == 0 || b.Numbers == 0 {
		return false
	}
	slack := rel*max(math.Abs(a.Min), math.Abs(a.Max), math.Abs(b.Min), math.Abs(b.Max)) + abs
	return a.Min <= b.Max+slack && b.Min <= a.Max+slack
}

func (b Band) String() string {
	s := "NaN"
	if b.Numbers > 0 {
		s = fmt.Sprintf("%g..%g", b.Min, b.Max)
		if b.NaN {
			s += " and NaN"
		}
	}
	return s
}
