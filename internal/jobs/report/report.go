// Package report computes a job's report (jobstats-like figures, per-node
// series with a median and p10–p90 band, stragglers and plain-language
// notes) from the store through PromQL, or from the job's stored Summary
// once the raw samples have expired, and renders it as text.
package report

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/store"
)

// Querier evaluates a PromQL range query; a query with start == end is an
// instant query. internal/query's API satisfies it through APIQuerier.
type Querier interface {
	Range(ctx context.Context, q string, start, end time.Time, step time.Duration) (promql.Matrix, error)
}

// MaxPoints bounds the points of each report series: the step is the job's
// run time over MaxPoints, rounded up to a whole second.
const MaxPoints = 500

// minWindow is the shortest rate window: two samples at a 30 s interval
// fit in it, so short jobs sampled slowly still get a rate.
const minWindow = time.Minute

// The report's metrics, in display order.
const (
	MetricCPU    = "cpu"    // cores used
	MetricMemory = "memory" // bytes used (rss + shmem)
	MetricRead   = "read"   // bytes/s
	MetricWrite  = "write"  // bytes/s
)

// Point is [unix seconds, value] in JSON, as in the Prometheus API.
type Point [2]float64

// Series is one metric of a report over the job's life.
type Series struct {
	Median []Point            `json:"median"`
	P10    []Point            `json:"p10"`
	P90    []Point            `json:"p90"`
	Nodes  map[string][]Point `json:"nodes"`
}

// Straggler is the verdict on one node and one metric, shaped for an alert
// metric: vigil_job_straggler{jobid=Job, node=Node, metric=Metric} = Deficit.
type Straggler struct {
	Job    string `json:"job"`
	Node   string `json:"node"`
	Metric string `json:"metric"` // cpu, read or write
	// Deficit is how far below its peers' median the node ran while it
	// was flagged: 1 − Σ node / Σ median over those steps (0.35 = 35 %).
	Deficit float64 `json:"deficit"`
	// Flagged is how long the node was below its peers' spread, and
	// Fraction that time over the job's run.
	Flagged  jobs.Duration `json:"flagged"`
	Fraction float64       `json:"fraction"`
}

// NodeDetail is what the report knows of a node beyond its NodeSummary.
type NodeDetail struct {
	Node       string  `json:"node"`
	CPUs       int     `json:"cpus,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds"`
	MemLimit   int64   `json:"mem_limit_bytes,omitempty"`
	OOMKills   int64   `json:"oom_kills,omitempty"`
	NoData     bool    `json:"no_data,omitempty"`
}

// Report is a job's report. Job, Summary and Series are the contract's;
// the rest is for alerting and the detailed table.
type Report struct {
	Job     jobs.Job           `json:"job"`
	Summary jobs.Summary       `json:"summary"`
	Series  map[string]*Series `json:"series"`
	// Source is "store" when computed from samples, "summary" when only
	// the stored Summary was left, "none" when there is neither.
	Source     string        `json:"source"`
	Elapsed    jobs.Duration `json:"elapsed"`
	Step       jobs.Duration `json:"step,omitempty"`
	CPUs       int           `json:"cpus,omitempty"` // allocated, whole job
	MemLimit   int64         `json:"mem_limit_bytes,omitempty"`
	OOMKills   int64         `json:"oom_kills,omitempty"`
	Stragglers []Straggler   `json:"stragglers,omitempty"`
	Details    []NodeDetail  `json:"details,omitempty"`
	// IO is the application I/O section, when the job has appio series.
	IO *IO `json:"io,omitempty"`
	// Energy is the job's energy, when its nodes have power series.
	Energy *Energy `json:"energy,omitempty"`
	// Lustre is the job's I/O as the Lustre servers counted it, per file
	// system (lustre.go), when they have job_stats of it.
	Lustre []LustreFS `json:"lustre,omitempty"`
}

// Build computes the report of job at time now (the end of a job still
// running). It reads the store through q; where the store holds nothing of
// the job it falls back on job.Summary.
func Build(ctx context.Context, q Querier, job jobs.Job, now time.Time) (*Report, error) {
	r := &Report{Job: job, Series: map[string]*Series{}, Source: "none"}
	start, end := job.Start, job.End
	if end.IsZero() || end.After(now) {
		end = now
	}
	if !start.IsZero() && end.After(start) {
		r.Elapsed = jobs.Duration(end.Sub(start))
	}
	if job.Summary != nil {
		r.Summary = *job.Summary
		r.Source = "summary"
		r.Stragglers = stragglersFromNames(job.ID, job.Summary.Stragglers)
		r.IO = ioFromSummary(job.Summary.AppIO)
		r.Energy = job.Summary.Energy
		r.Lustre = job.Summary.Lustre
	}
	if job.ID == "" || start.IsZero() || !end.After(start) || q == nil {
		r.finish()
		return r, nil
	}
	got, err := fromStore(ctx, q, r, start, end)
	if err != nil {
		return nil, err
	}
	if !got {
		// From the summary: the notes stay as they were written.
		if err := r.addFiles(ctx, q, job.ID, start, end); err != nil {
			return nil, err
		}
		if job.Summary == nil {
			r.Summary.Notes = append(r.Summary.Notes, ioNotes(r.IO)...)
		}
	}
	if !got && job.Summary == nil {
		r.Summary.Notes = append(r.Summary.Notes, "no samples of this job are stored (it ran before Vigil watched its nodes, or its data expired before a summary was written)")
	}
	r.finish()
	return r, nil
}

// addFiles puts the job's top files into the I/O section (made if the
// job has no appio series but the record store has files).
func (r *Report) addFiles(ctx context.Context, q Querier, id string, start, end time.Time) error {
	files, err := topFiles(ctx, q, id, start, end)
	if err != nil || files == nil {
		return err
	}
	if r.IO == nil {
		nb := appio.NBuckets
		r.IO = &IO{Buckets: slices.Clone(appio.BucketLabels[:]), ReadSizes: make([]float64, nb), WriteSizes: make([]float64, nb)}
	}
	r.IO.Files = files
	return nil
}

// finish fills what both sources leave empty.
func (r *Report) finish() {
	if r.Summary.PerNode == nil {
		r.Summary.PerNode = []jobs.NodeSummary{}
	}
	if r.CPUs == 0 {
		r.CPUs = r.Job.CPUs
	}
}

// stragglersFromNames turns a stored Summary's straggler names into
// verdicts whose figures are no longer known.
func stragglersFromNames(id string, names []string) []Straggler {
	var out []Straggler
	for _, n := range names {
		out = append(out, Straggler{Job: id, Node: n, Metric: MetricCPU})
	}
	return out
}

// selector matches the job's series. The id is quoted as a PromQL string;
// node names are not needed in it: the jobid label is unique per job.
func selector(name, id string) string {
	return fmt.Sprintf(`%s{jobid=%s}`, name, strconv.Quote(id))
}

// stepFor keeps a span to at most MaxPoints steps of whole seconds.
func stepFor(span time.Duration) time.Duration {
	s := (span + MaxPoints*time.Second - 1) / (MaxPoints * time.Second)
	return max(s*time.Second, time.Second)
}

func promDur(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) + "s" }

// nodeOf returns a series' node label, or "" when it has none.
func nodeOf(s promql.Series) string { return s.Metric.Get("node") }

// totals are the counters and gauges read at the job's end, by node.
var totals = []struct {
	metric string
	set    func(*nodeAcc, float64)
}{
	{"vigil_job_cpu_user_seconds_total", func(a *nodeAcc, v float64) { a.cpu += v }},
	{"vigil_job_cpu_system_seconds_total", func(a *nodeAcc, v float64) { a.cpu += v }},
	{"vigil_job_read_bytes_total", func(a *nodeAcc, v float64) { a.read = max(a.read, v) }},
	{"vigil_job_write_bytes_total", func(a *nodeAcc, v float64) { a.write = max(a.write, v) }},
	{"vigil_job_oom_kills_total", func(a *nodeAcc, v float64) { a.ooms = max(a.ooms, v) }},
	{"vigil_job_cpus", func(a *nodeAcc, v float64) { a.cpus = max(a.cpus, v) }},
	{"vigil_job_memory_limit_bytes", func(a *nodeAcc, v float64) { a.limit = max(a.limit, v) }},
}

type nodeAcc struct {
	cpu, read, write, cpus, limit, ooms, memPeak float64
	// lastCPU is the time of the node's last CPU sample a 1 s subquery
	// sees (zero if none), cpuAt the CPU seconds then.
	lastCPU time.Time
	cpuAt   float64
	seen    bool
}

// maxTail bounds the unsampled end of a node's run that its CPU rate is
// extrapolated over: up to one sampling interval (at most minWindow, see
// there) plus the scheduler's rounding of the end time. A node silent for
// longer was lost, and its silence counts as unused.
const maxTail = minWindow + time.Second

// cpuUsed is a's CPU seconds over start..end: the counters stop at the
// node's last tick before the job's cgroup goes, up to an interval before
// the end, so the rest is counted at the node's mean rate. Without this a
// 10 s job sampled every second reads up to 10 % low.
func (a *nodeAcc) cpuUsed(start, end time.Time) float64 {
	seen := a.lastCPU.Sub(start)
	if a.lastCPU.IsZero() || seen <= 0 || !a.lastCPU.Before(end) || end.Sub(a.lastCPU) > maxTail {
		return a.cpu
	}
	return max(a.cpu, a.cpuAt*end.Sub(start).Seconds()/seen.Seconds())
}

// rangeQueries are the per-node series, by report metric; a metric named
// twice is the sum of its queries (CPU: user + system, queried apart
// because rate drops the metric name and the two would collide). Windows
// are the step (at least minWindow), so each sample is read about once.
func rangeQueries(id string, win time.Duration, rollup bool) [][2]string {
	w := promDur(win)
	sel := func(name string) string {
		if rollup {
			return fmt.Sprintf(`%s{jobid=%s,%s=%q}`, name, strconv.Quote(id), store.RollupLabel, store.AggMax)
		}
		return selector(name, id)
	}
	rate := func(name string) string {
		return fmt.Sprintf(`sum by (node) (rate(%s[%s]))`, sel(name), w)
	}
	return append([][2]string{
		{MetricCPU, rate("vigil_job_cpu_user_seconds_total")},
		{MetricCPU, rate("vigil_job_cpu_system_seconds_total")},
		{MetricMemory, fmt.Sprintf(`max by (node) (max_over_time(%s[%s]))`, sel("vigil_job_memory_used_bytes"), w)},
		{MetricRead, rate("vigil_job_read_bytes_total")},
		{MetricWrite, rate("vigil_job_write_bytes_total")},
	}, ioRangeQueries(id, sel, w)...)
}

// addPoints adds b into a where their times match; times only in b are
// left out: a node's CPU needs both halves.
func addPoints(a, b []Point) []Point {
	j := 0
	out := a[:0]
	for _, p := range a {
		for j < len(b) && b[j][0] < p[0] {
			j++
		}
		if j < len(b) && b[j][0] == p[0] {
			out = append(out, Point{p[0], p[1] + b[j][1]})
		}
	}
	return out
}

// fromStore fills r from the samples; false when there were none, r then
// keeps what the stored Summary gave it.
func fromStore(ctx context.Context, q Querier, r *Report, start, end time.Time) (bool, error) {
	id := r.Job.ID
	span := end.Sub(start)
	step := stepFor(span)
	win := max(step, minWindow)
	per := map[string]*nodeAcc{}
	get := func(n string) *nodeAcc {
		a := per[n]
		if a == nil {
			a = &nodeAcc{}
			per[n] = a
		}
		return a
	}
	for _, n := range r.Job.Nodes {
		get(n)
	}
	// Totals: cgroup counters start at zero when Slurm makes the job's
	// cgroup, so the last value is the job's whole use on the node, even
	// when Vigil began watching late. last_over_time skips the stale
	// markers written when the series stop, which an instant selector at
	// the end would hit; its 10-minute window keeps the read small.
	// (One query per metric: functions drop the metric name.)
	found := false
	for _, t := range totals {
		m, err := q.Range(ctx, fmt.Sprintf(`max by (node) (last_over_time(%s[10m]))`, selector(t.metric, id)), end, end, step)
		if err != nil {
			return false, fmt.Errorf("job %s: %s at its end: %w", id, t.metric, err)
		}
		for _, s := range m {
			n := nodeOf(s)
			if n == "" || len(s.Floats) == 0 {
				continue
			}
			v := s.Floats[len(s.Floats)-1].F
			if !finite(v) || v < 0 {
				continue
			}
			a := get(n)
			a.seen = true
			t.set(a, v)
			found = true
		}
	}
	// Each node's last CPU sample and its time (timestamp of a selector
	// is its sample's time), from 1 s subqueries over the tail's bound:
	// both see the same sample, which may be one before the last when the
	// last falls after the final whole second.
	tailQ := func(expr string) string {
		return fmt.Sprintf(`max by (node) (last_over_time(%s[%s:1s]))`, expr, promDur(maxTail+time.Second))
	}
	user, system := selector("vigil_job_cpu_user_seconds_total", id), selector("vigil_job_cpu_system_seconds_total", id)
	for k, expr := range []string{tailQ("timestamp(" + user + ")"), tailQ(user), tailQ(system)} {
		m, err := q.Range(ctx, expr, end, end, step)
		if err != nil {
			return false, fmt.Errorf("job %s: its last CPU sample: %w", id, err)
		}
		for _, s := range m {
			a := per[nodeOf(s)]
			if a == nil || len(s.Floats) == 0 || !finite(s.Floats[len(s.Floats)-1].F) {
				continue
			}
			v := s.Floats[len(s.Floats)-1].F
			if k == 0 {
				a.lastCPU = time.UnixMilli(int64(v * 1000))
			} else {
				a.cpuAt += v
			}
		}
	}
	// Series, over the run: the first step is a window after the start.
	// Where the server's rollups cover the job and a step is at least a
	// rollup minute, the series come from the rollups' per-minute maxima
	// (a counter's maximum in a minute is its value at the minute's end,
	// a gauge's is its peak) up to the watermark, and from raw samples
	// after it: a day of a thousand nodes is then 60 times fewer samples.
	nodeSeries := map[string]map[string][]Point{}
	split := start
	if wm := watermark(q); step >= store.RollupStep && wm.After(start.Add(2*step)) {
		step = (step + store.RollupStep - 1) / store.RollupStep * store.RollupStep
		win = step
		if wm.After(end) {
			wm = end
		}
		split = start.Add(wm.Sub(start) / step * step)
		if err := seriesOver(ctx, q, id, start.Add(step), split, step, win, true, nodeSeries, get, &found); err != nil {
			return false, err
		}
	}
	if from := split.Add(step); !split.Equal(end) {
		if from.After(end) {
			from = end
		}
		if err := seriesOver(ctx, q, id, from, end, step, win, false, nodeSeries, get, &found); err != nil {
			return false, err
		}
	}
	if !found {
		return false, nil
	}
	r.Source = "store"
	r.Step = jobs.Duration(step)
	for name, byNode := range nodeSeries {
		if len(byNode) > 0 || (name != MetricAppIOBytes && name != MetricAppIOMeta) {
			r.Series[name] = band(byNode)
		}
	}
	io, err := ioFromStore(ctx, q, id, start, end, step)
	if err != nil {
		return false, err
	}
	r.IO = io
	if r.Energy, err = jobEnergy(ctx, q, r, per, start, end, step); err != nil {
		return false, err
	}
	if r.Lustre, err = lustreFromStore(ctx, q, id, start, end, step); err != nil {
		return false, err
	}
	if err := r.addFiles(ctx, q, id, start, end); err != nil {
		return false, err
	}

	nodes := make([]string, 0, len(per))
	for n := range per {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, compareNodes)
	elapsed := span.Seconds()
	var sum jobTotals
	for n, pts := range nodeSeries[MetricMemory] {
		for _, p := range pts {
			get(n).memPeak = max(get(n).memPeak, p[1])
		}
	}
	// Whole-job peak: the largest sum over nodes at one step, each node
	// counted by its peak within the step's window.
	sum.memPeak = maxOfSums(nodeSeries[MetricMemory])
	fallbackCPUs := 0.0
	if r.Job.CPUs > 0 && len(nodes) > 0 {
		fallbackCPUs = float64(r.Job.CPUs) / float64(len(nodes))
	}
	for _, n := range nodes {
		a := per[n]
		cpus := a.cpus
		if cpus == 0 {
			cpus = fallbackCPUs
		}
		used := a.cpuUsed(start, end)
		ns := jobsNodeSummary(n, a, used, cpus, elapsed)
		sum.nodes = append(sum.nodes, ns)
		sum.cpu += used
		sum.cpus += a.cpus
		sum.read += a.read
		sum.write += a.write
		sum.limit += a.limit
		sum.ooms += a.ooms
		r.Details = append(r.Details, NodeDetail{Node: n, CPUs: int(a.cpus), CPUSeconds: a.cpu, MemLimit: int64(a.limit), OOMKills: int64(a.ooms), NoData: !a.seen})
	}
	alloc := float64(r.Job.CPUs)
	if alloc == 0 {
		alloc = sum.cpus
	}
	r.CPUs = int(alloc)
	r.MemLimit = int64(sum.limit)
	r.OOMKills = int64(sum.ooms)
	s := jobs.Summary{
		MemUsedPeak: int64(sum.memPeak),
		ReadBytes:   int64(sum.read),
		WriteBytes:  int64(sum.write),
		PerNode:     sum.nodes,
	}
	if alloc > 0 && elapsed > 0 {
		s.CPUEfficiency = sum.cpu / (alloc * elapsed)
	}
	if asked := memAsked(r); asked > 0 {
		s.MemEfficiency = sum.memPeak / float64(asked)
	}
	r.Stragglers = findStragglers(id, nodeSeries, step, span)
	for _, st := range r.Stragglers {
		if !slices.Contains(s.Stragglers, st.Node) {
			s.Stragglers = append(s.Stragglers, st.Node)
		}
	}
	r.Summary = s
	r.Summary.Notes = append(append(notes(r), ioNotes(r.IO)...), energyNotes(r.Energy)...)
	r.Summary.AppIO = summaryIO(r.IO)
	r.Summary.Energy = summaryEnergy(r.Energy)
	r.Summary.Lustre = slices.Clone(r.Lustre)
	return true, nil
}

// seriesOver adds the per-node series from..end to nodeSeries, appending
// to what an earlier part left.
func seriesOver(ctx context.Context, q Querier, id string, from, end time.Time, step, win time.Duration, rollup bool,
	nodeSeries map[string]map[string][]Point, get func(string) *nodeAcc, found *bool) error {
	part := map[string]map[string][]Point{}
	for _, rq := range rangeQueries(id, win, rollup) {
		m, err := q.Range(ctx, rq[1], from, end, step)
		if err != nil {
			return fmt.Errorf("job %s: %s series: %w", id, rq[0], err)
		}
		byNode := part[rq[0]]
		merge := byNode != nil
		if !merge {
			byNode = map[string][]Point{}
		}
		for _, s := range m {
			n := nodeOf(s)
			if n == "" {
				continue
			}
			pts := make([]Point, 0, len(s.Floats))
			for _, p := range s.Floats {
				if finite(p.F) {
					pts = append(pts, Point{float64(p.T) / 1000, p.F})
				}
			}
			if len(pts) == 0 {
				continue
			}
			if merge {
				if prev, ok := byNode[n]; ok {
					pts = addPoints(prev, pts)
				}
			}
			byNode[n] = pts
			get(n).seen = true
			*found = true
		}
		part[rq[0]] = byNode
	}
	for metric, byNode := range part {
		all := nodeSeries[metric]
		if all == nil {
			all = map[string][]Point{}
			nodeSeries[metric] = all
		}
		for n, pts := range byNode {
			all[n] = append(all[n], pts...)
		}
	}
	return nil
}

// watermark is the end of the rollups q can read, zero without any.
func watermark(q Querier) time.Time {
	if w, ok := q.(interface{ RollupWatermark() time.Time }); ok {
		return w.RollupWatermark()
	}
	return time.Time{}
}

// jobTotals accumulates the whole job.
type jobTotals struct {
	cpu, cpus, read, write, limit, ooms, memPeak float64
	nodes                                        []jobs.NodeSummary
}

func jobsNodeSummary(n string, a *nodeAcc, cpuUsed, cpus, elapsed float64) jobs.NodeSummary {
	ns := jobs.NodeSummary{Node: n, MemUsedPeak: int64(a.memPeak), ReadBytes: int64(a.read), WriteBytes: int64(a.write)}
	if cpus > 0 && elapsed > 0 {
		ns.CPUEfficiency = cpuUsed / (cpus * elapsed)
	}
	return ns
}

// memAsked is the memory the job asked for: the request, else the sum of
// its cgroup limits.
func memAsked(r *Report) int64 {
	if r.Job.MemBytes > 0 {
		return r.Job.MemBytes
	}
	return r.MemLimit
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// maxOfSums is the largest sum over nodes of the values at one time.
func maxOfSums(byNode map[string][]Point) float64 {
	sums := map[float64]float64{}
	for _, pts := range byNode {
		for _, p := range pts {
			sums[p[0]] += p[1]
		}
	}
	best := 0.0
	for _, v := range sums {
		best = max(best, v)
	}
	return best
}

// band is the median and p10–p90 over nodes at each time, and the nodes'
// own series.
func band(byNode map[string][]Point) *Series {
	s := &Series{Median: []Point{}, P10: []Point{}, P90: []Point{}, Nodes: byNode}
	at := map[float64][]float64{}
	for _, pts := range byNode {
		for _, p := range pts {
			at[p[0]] = append(at[p[0]], p[1])
		}
	}
	ts := make([]float64, 0, len(at))
	for t := range at {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	for _, t := range ts {
		vs := at[t]
		slices.Sort(vs)
		s.Median = append(s.Median, Point{t, quantile(vs, 0.5)})
		s.P10 = append(s.P10, Point{t, quantile(vs, 0.1)})
		s.P90 = append(s.P90, Point{t, quantile(vs, 0.9)})
	}
	return s
}

// quantile of sorted vs, interpolated linearly between ranks as PromQL's
// quantile does.
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	rank := q * float64(len(vs)-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, len(vs)-1)
	w := rank - float64(lo)
	return vs[lo]*(1-w) + vs[hi]*w
}

// compareNodes orders node names with their numbers as numbers (cn2 before
// cn10).
func compareNodes(a, b string) int {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if c := cmpInt(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmpInt(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(len(a), len(b))
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
