package simulate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	_ "github.com/vigil-hpc/vigil/internal/sampler/plugins/jobs"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// cluster is a scheduler and its nodes, sampled in turn by the test.
type cluster struct {
	sched *Scheduler
	nodes []*Node
	t     time.Time
	b     []metric.Batch
}

func newCluster(t testing.TB, nodes, cpus int, seed uint64) *cluster {
	t.Helper()
	s, err := NewScheduler(SchedulerOptions{Nodes: nodes, CPUs: cpus, Interval: time.Second, Seed: seed,
		MinRun: 20 * time.Second, MaxRun: 300 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{sched: s, t: time.Unix(1_763_800_000, 0), b: make([]metric.Batch, nodes)}
	sch := NewSchema(cpus)
	for i := range nodes {
		n := NewNode(NodeName(i+1), sch, uint64(i+1))
		n.SetScheduler(s, i)
		c.nodes = append(c.nodes, n)
	}
	return c
}

// tick samples every node once; c.b holds the batches.
func (c *cluster) tick() {
	c.t = c.t.Add(time.Second)
	for i, n := range c.nodes {
		c.b[i].Reset(c.t)
		n.Sample(c.t, time.Second, &c.b[i])
	}
}

// jobValues maps jobid → series name → value of one node's batch.
func jobValues(b *metric.Batch) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for i, d := range b.Descs {
		if len(d.Labels) != 1 || d.Labels[0].Name != "jobid" {
			continue
		}
		m := out[d.Labels[0].Value]
		if m == nil {
			m = map[string]float64{}
			out[d.Labels[0].Value] = m
		}
		m[d.Name] = b.Values[i]
	}
	return out
}

func nodeValue(b *metric.Batch, name string) float64 {
	for i, d := range b.Descs {
		if d.Name == name {
			return b.Values[i]
		}
	}
	return math.NaN()
}

func nodeCPU(b *metric.Batch, mode string) float64 {
	sum := 0.0
	for i, d := range b.Descs {
		if d.Name == "node_cpu_seconds_total" && d.Labels[1].Value == mode {
			sum += b.Values[i]
		}
	}
	return sum
}

func TestSchedulerDeterministic(t *testing.T) {
	run := func(seed uint64) ([]SimJob, []float64) {
		c := newCluster(t, 32, 2, seed)
		var vals []float64
		for range 300 {
			c.tick()
			for _, b := range c.b {
				vals = append(vals, b.Values...)
			}
		}
		return c.sched.Jobs(), vals
	}
	j1, v1 := run(7)
	j2, v2 := run(7)
	j3, _ := run(8)
	if len(j1) < 10 {
		t.Fatalf("%d jobs in 300 ticks on 32 nodes", len(j1))
	}
	if fmt.Sprint(j1) != fmt.Sprint(j2) {
		t.Errorf("same seed, different jobs:\n%v\n%v", j1, j2)
	}
	if !slices.Equal(v1, v2) {
		t.Error("same seed, different node values")
	}
	if fmt.Sprint(j1) == fmt.Sprint(j3) {
		t.Error("seeds 7 and 8 gave the same jobs")
	}
}

func TestSchedulerPlacement(t *testing.T) {
	const nodes = 64
	c := newCluster(t, nodes, 2, 1)
	states := map[string]int{}
	maxRunning := 0
	for tick := range 1500 {
		c.tick()
		running := 0
		holder := map[string]string{}
		for _, j := range c.sched.Jobs() {
			if j.State == "running" {
				running++
			}
			if j.State == "running" || j.State == "pending" {
				continue
			}
			if j.End.Before(j.Start) || j.Start.Before(j.Submit) {
				t.Fatalf("job %s: submit %v start %v end %v", j.ID, j.Submit, j.Start, j.End)
			}
		}
		for _, j := range c.sched.Jobs() {
			if j.State != "running" {
				continue
			}
			if len(j.Nodes) < 1 || len(j.Nodes) > nodes/8 || j.CPUs != 2*len(j.Nodes) {
				t.Fatalf("job %s: %d nodes, %d cpus", j.ID, len(j.Nodes), j.CPUs)
			}
			for _, n := range j.Nodes {
				if o, ok := holder[n]; ok {
					t.Fatalf("tick %d: %s runs jobs %s and %s", tick, n, o, j.ID)
				}
				holder[n] = j.ID
			}
		}
		// What each node reports agrees: one running job, the one placed.
		for i, b := range c.b {
			var on []string
			for id, v := range jobValues(&b) {
				if v["vigil_job_running"] == 1 {
					on = append(on, id)
				}
			}
			want := holder[NodeName(i+1)]
			if len(on) > 1 || (want == "") != (len(on) == 0) || (want != "" && on[0] != want) {
				t.Fatalf("tick %d: %s reports jobs %v, scheduler placed %q", tick, NodeName(i+1), on, want)
			}
			ranks := 0
			for _, d := range b.Descs {
				if d.Name == "vigil_process_cpu_seconds_total" && len(d.Labels) == 4 {
					ranks++
					if d.Labels[3].Name != "jobid" || d.Labels[3].Value != want {
						t.Fatalf("tick %d: %s top process %v, job %q", tick, NodeName(i+1), d.Labels, want)
					}
				}
			}
			if (want != "") != (ranks == 3) {
				t.Fatalf("tick %d: %s has %d top processes of job %q", tick, NodeName(i+1), ranks, want)
			}
		}
		maxRunning = max(maxRunning, running)
	}
	prev := 0
	for _, j := range c.sched.Jobs() {
		states[j.State]++
		id, err := strconv.Atoi(j.ID)
		if err != nil || id <= prev {
			t.Errorf("job %q after %d: want ids in submission order", j.ID, prev)
		}
		prev = id
	}
	if maxRunning > nodes/2 || maxRunning < 4 {
		t.Errorf("at most %d jobs at once on %d nodes", maxRunning, nodes)
	}
	if states["completed"] < 10 {
		t.Errorf("job states %v: want many completed", states)
	}
}

func TestSchedulerJobEnd(t *testing.T) {
	c := newCluster(t, 32, 2, 3)
	type key struct {
		node int
		id   string
	}
	zeros := map[key]int{}
	ended := map[key]int{} // tick of running 0
	for tick := range 800 {
		c.tick()
		for i, b := range c.b {
			on := 0
			for _, v := range jobValues(&b) {
				if v["vigil_job_running"] == 1 {
					on++
				}
			}
			if got := nodeValue(&b, "vigil_jobs"); got != float64(on) {
				t.Fatalf("%s: vigil_jobs %v with %d jobs running", NodeName(i+1), got, on)
			}
			for id, v := range jobValues(&b) {
				k := key{i, id}
				if at, ok := ended[k]; ok {
					t.Fatalf("%s job %s: series at tick %d after running 0 at %d: %v", NodeName(i+1), id, tick, at, v)
				}
				switch v["vigil_job_running"] {
				case 0:
					if len(v) != 1 {
						t.Fatalf("%s job %s ended with other series: %v", NodeName(i+1), id, v)
					}
					zeros[k]++
					ended[k] = tick
				case 1:
					if len(v) != nJobSeries {
						t.Fatalf("%s job %s: %d series, want %d", NodeName(i+1), id, len(v), nJobSeries)
					}
				}
			}
		}
	}
	if len(zeros) < 10 {
		t.Fatalf("%d job ends seen", len(zeros))
	}
	perNode := make([]int, len(c.nodes))
	for k := range zeros {
		perNode[k.node]++
	}
	for i, b := range c.b {
		if got := nodeValue(&b, "vigil_jobs_ended_total"); got != float64(perNode[i]) {
			t.Errorf("%s: vigil_jobs_ended_total %v, %d ends seen", NodeName(i+1), got, perNode[i])
		}
	}
	// Every ended job's nodes said so.
	for _, j := range c.sched.Jobs() {
		if j.State == "running" || j.State == "pending" || j.End.After(c.t) {
			continue
		}
		for _, n := range j.Nodes {
			var i int
			fmt.Sscanf(n, "cn%d", &i)
			if zeros[key{i - 1, j.ID}] != 1 {
				t.Errorf("job %s (%s) on %s: running 0 sent %d times", j.ID, j.State, n, zeros[key{i - 1, j.ID}])
			}
		}
	}
}

// TestSchedulerLoad: node CPU includes the job's, a straggler is slower
// than its peers, a memory waster uses little of what it asked.
func TestSchedulerLoad(t *testing.T) {
	const nodes = 96
	c := newCluster(t, nodes, 4, 5)
	const ticks = 60
	c.tick()
	first := make([]metric.Batch, nodes)
	for i := range c.b {
		first[i].CopyFrom(&c.b[i])
	}
	for range ticks {
		c.tick()
	}
	jobs := map[string]SimJob{}
	for _, j := range c.sched.Jobs() {
		jobs[j.ID] = j
	}
	stragglers, wasters := 0, 0
	// Per job, the CPU seconds per second of each node that ran it all along.
	rates := map[string]map[string]float64{}
	for i := range c.b {
		v0, v1 := jobValues(&first[i]), jobValues(&c.b[i])
		for id, v := range v1 {
			if v["vigil_job_running"] != 1 || v0[id]["vigil_job_running"] != 1 {
				continue
			}
			ju := v["vigil_job_cpu_user_seconds_total"] - v0[id]["vigil_job_cpu_user_seconds_total"]
			js := v["vigil_job_cpu_system_seconds_total"] - v0[id]["vigil_job_cpu_system_seconds_total"]
			nu := nodeCPU(&c.b[i], "user") - nodeCPU(&first[i], "user")
			ns := nodeCPU(&c.b[i], "system") - nodeCPU(&first[i], "system")
			if math.Abs(ju-nu) > 0.02 || math.Abs(js-ns) > 0.02 {
				t.Errorf("%s: job %s used %.2f+%.2f CPU s, node %.2f+%.2f", NodeName(i+1), id, ju, js, nu, ns)
			}
			if rates[id] == nil {
				rates[id] = map[string]float64{}
			}
			rates[id][NodeName(i+1)] = (ju + js) / ticks
			used, limit := v["vigil_job_memory_used_bytes"], v["vigil_job_memory_limit_bytes"]
			if used <= 0 || used > limit || v["vigil_job_memory_peak_bytes"] < used {
				t.Errorf("job %s on %s: used %v, peak %v, limit %v", id, NodeName(i+1), used, v["vigil_job_memory_peak_bytes"], limit)
			}
			if free := nodeValue(&c.b[i], "node_memory_MemFree_bytes"); free > nodeValue(&c.b[i], "node_memory_MemTotal_bytes")-used {
				t.Errorf("%s: MemFree %v with job memory %v", NodeName(i+1), free, used)
			}
			if j := jobs[id]; j.MemUsed < 0.1 {
				wasters++
				if used > 0.1*limit {
					t.Errorf("waster %s uses %.0f%% of its limit", id, 100*used/limit)
				}
			}
		}
	}
	for id, r := range rates {
		j := jobs[id]
		if j.Straggler == "" || len(r) < 2 {
			continue
		}
		var peers []float64
		for n, v := range r {
			if n != j.Straggler {
				peers = append(peers, v)
			}
		}
		slices.Sort(peers)
		med := peers[len(peers)/2]
		s, ok := r[j.Straggler]
		if !ok {
			continue
		}
		stragglers++
		if s > 0.7*med || s < 0.5*med {
			t.Errorf("job %s: straggler %s at %.2f CPUs, peers' median %.2f", id, j.Straggler, s, med)
		}
		for n, v := range r {
			if n != j.Straggler && v < 0.8*med {
				t.Errorf("job %s: peer %s at %.2f, median %.2f", id, n, v, med)
			}
		}
	}
	t.Logf("%d jobs compared, %d stragglers, %d memory wasters", len(rates), stragglers, wasters)
	if stragglers == 0 || wasters == 0 {
		t.Errorf("%d stragglers, %d memory wasters seen running: want some", stragglers, wasters)
	}
}

// TestJobSeriesAsPlugin: the job series have the jobs plugin's names,
// help, types and label.
func TestJobSeriesAsPlugin(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "jobs", "../sampler/plugins/jobs/testdata/v2", nil)
	var b metric.Batch
	now := time.Now()
	b.Reset(now)
	if err := p.Sample(context.Background(), now, &b); err != nil {
		t.Fatal(err)
	}
	ours := map[string]int{}
	for i, s := range jobSeries {
		ours[s.Name] = i
	}
	matched := 0
	node := map[string]*metric.Desc{}
	for _, d := range NewSchema(1).jobsNode {
		node[d.Name] = d
	}
	for _, d := range b.Descs {
		if len(d.Labels) == 0 {
			if o := node[d.Name]; o == nil || o.Help != d.Help || o.Type != d.Type {
				t.Errorf("plugin node series %s %q %v, simulated %v", d.Name, d.Help, d.Type, o)
			}
			delete(node, d.Name)
			continue
		}
		if d.Labels[0].Name != "jobid" {
			continue
		}
		i, ok := ours[d.Name]
		if !ok {
			t.Errorf("plugin series %s not simulated", d.Name)
			continue
		}
		if s := jobSeries[i]; s.Help != d.Help || s.Type != d.Type || len(d.Labels) != 1 {
			t.Errorf("%s: simulated %q %v, plugin %q %v %v", d.Name, s.Help, s.Type, d.Help, d.Type, d.Labels)
		}
		matched++
	}
	if len(node) > 0 {
		t.Errorf("simulated node series the plugin has not: %v", node)
	}
	if matched < 10 {
		t.Errorf("only %d plugin job series compared", matched)
	}
}

func TestSchedulerBounds(t *testing.T) {
	for _, o := range []SchedulerOptions{{Nodes: 0, CPUs: 1, Interval: time.Second}, {Nodes: 1, CPUs: 0, Interval: time.Second}, {Nodes: 1, CPUs: 1}} {
		if _, err := NewScheduler(o); err == nil {
			t.Errorf("NewScheduler(%+v) accepted", o)
		}
	}
	// One node: one job at a time; a day-long stall is skipped, not replayed.
	c := newCluster(t, 1, 2, 1)
	for range 100 {
		c.tick()
	}
	c.t = c.t.Add(24 * time.Hour)
	start := time.Now()
	c.tick()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a day's stall took %s to catch up", d)
	}
	running := 0
	for _, j := range c.sched.Jobs() {
		if j.State == "running" {
			running++
		}
	}
	if running > 1 {
		t.Errorf("%d jobs running on one node", running)
	}
}
