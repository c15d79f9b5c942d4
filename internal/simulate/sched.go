package simulate

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	jobsplugin "github.com/vigil-hpc/vigil/internal/sampler/plugins/jobs"
)

// SimJob is one job of the simulated scheduler, described as Slurm would
// describe it (the fields of the server's job index), plus what the
// simulator made of it.
type SimJob struct {
	ID        string
	User      string
	UID       int
	Account   string
	Partition string
	Name      string
	Nodes     []string // empty while pending
	CPUs      int      // allocated: nodes × cores per node
	MemBytes  int64    // requested, whole job
	TimeLimit time.Duration
	Submit    time.Time
	Start     time.Time // zero while pending
	End       time.Time // zero until it ends
	State     string    // pending, running, completed, failed, timeout, oom
	ExitCode  int

	// Simulated behaviour: the node held back (empty if none), the CPU
	// efficiency of its other nodes and the fraction of the requested
	// memory it reaches.
	Straggler     string
	CPUEfficiency float64
	MemUsed       float64
}

// SchedulerOptions configure NewScheduler.
type SchedulerOptions struct {
	Nodes    int
	First    int           // number of the first node, as Options.First
	CPUs     int           // cores per node (jobs take whole nodes)
	Interval time.Duration // one scheduling step per tick
	Seed     uint64
	MaxJobs  int           // running at once (0: Nodes/2, at least 1)
	MinRun   time.Duration // run times are log-uniform in [MinRun, MaxRun] (0: 1m, 1h)
	MaxRun   time.Duration
	History  int // ended jobs kept for Jobs (0: the larger of 1000 and Nodes)
}

// Scheduler places jobs on the simulated nodes: a queue filled to keep
// about three quarters of the cluster busy, first fit on whole free nodes.
// It advances one step per tick interval from the first tick asked for;
// its decisions depend only on the seed and the step, not on which node
// group asks first, so runs are reproducible.
type Scheduler struct {
	o      SchedulerOptions
	mu     sync.Mutex
	rng    *rand.Rand
	t0     time.Time // time of step 0 (the first tick asked for)
	begun  bool
	step   int64 // last step done
	nextID int
	names  []string
	free   []bool
	nFree  int
	// hist holds each node's last two runs, so a node group that lags a
	// little behind another still finds the run of its tick.
	hist    [][2]*run
	pending []*jobRec
	running []*jobRec
	ended   []*jobRec // ring of the last History
	endNext int
	events  func(JobEvent)
}

// jobRec is a job as the scheduler tracks it (guarded by Scheduler.mu).
type jobRec struct {
	SimJob
	size int
	idx  []int // scheduler indexes of Nodes
	dur  int64 // run steps
	plan plan
	r    *run
}

// plan is what the job will do, drawn at submission.
type plan struct {
	eff        float64
	stragRel   int // index among the job's nodes of the straggler, -1: none
	memLimit   int64
	memUse     int64 // per node, at most
	growing    bool
	endState   string
	exitCode   int
	threads    int
	inBytes    float64
	ckptEvery  int64
	ckptLen    int64
	ckptRate   float64
	readTrick  float64
	writeTrick float64
}

// run is a placed job as its nodes see it; immutable once placed, read by
// the node goroutines without a lock.
type run struct {
	plan
	d          [nJobSeries]*metric.Desc
	start, end int64 // runs on steps [start, end)
	straggler  int   // scheduler node index, -1: none
	oomNode    int   // node whose OOM killer fires, -1: none
	uid        float64
	id         string
	user, comm string // of its processes
}

// Indexes of the jobs sampler plugin's per-job series (jobsplugin.PerJob).
const (
	jRunning = iota
	jCPUUser
	jCPUSystem
	jCPUs
	jMemUsed
	jMemPeak
	jMemLimit
	jOOMKills
	jLimitHits
	jProcs
	jThreads
	jRead
	jWrite
	jUID
	nJobSeries
)

// jobSeries are the jobs plugin's, in the order of the j* indexes
// (TestJobSeriesAsPlugin checks it against the plugin's output).
var jobSeries = jobsplugin.PerJob

var simUsers = [...]struct{ name, account string }{
	{"alice", "physics"}, {"bkumar", "physics"}, {"chen.li", "chem"}, {"dmitri", "chem"},
	{"efua", "bio"}, {"fgarcia", "bio"}, {"gwen", "climate"}, {"hiro", "climate"},
	{"ines", "astro"}, {"jpark", "astro"}, {"kofi", "ml"}, {"lena_m", "ml"},
}

var simJobNames = [...]string{"lmp_melt", "gmx_md", "vasp_relax", "wrf_d02", "namd_apoa1", "train.py",
	"cp2k_opt", "openfoam_les", "hpl", "nekrs_pipe", "qe_scf", "run.sh"}

const (
	gib         = 1 << 30
	fillTarget  = 0.75 // busy share of the nodes the queue aims at
	maxPending  = 32
	stepsMaxGap = 3600 // a longer stall (a suspended process) skips steps
)

// NewScheduler returns a scheduler for the nodes o describes.
func NewScheduler(o SchedulerOptions) (*Scheduler, error) {
	switch {
	case o.Nodes <= 0:
		return nil, fmt.Errorf("scheduler: nodes %d: must be positive", o.Nodes)
	case o.CPUs <= 0:
		return nil, fmt.Errorf("scheduler: cpus %d: must be positive", o.CPUs)
	case o.Interval <= 0:
		return nil, fmt.Errorf("scheduler: interval %s: must be positive", o.Interval)
	}
	if o.First <= 0 {
		o.First = 1
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = max(o.Nodes/2, 1)
	}
	if o.MinRun <= 0 {
		o.MinRun = time.Minute
	}
	if o.MaxRun < o.MinRun {
		o.MaxRun = max(time.Hour, o.MinRun)
	}
	if o.History <= 0 {
		o.History = max(1000, o.Nodes)
	}
	s := &Scheduler{
		o:      o,
		rng:    rand.New(rand.NewPCG(o.Seed, 0x10b5)),
		step:   -1,
		nextID: 1000*o.First + 1, // another process's nodes (--first) get other ids
		free:   make([]bool, o.Nodes),
		nFree:  o.Nodes,
		hist:   make([][2]*run, o.Nodes),
	}
	for i := range o.Nodes {
		s.names = append(s.names, NodeName(o.First+i))
		s.free[i] = true
	}
	return s, nil
}

// Jobs lists the scheduler's jobs, pending, running and the last ended
// ones, in submission order. The slices are copies.
func (s *Scheduler) Jobs() []SimJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	var recs []*jobRec
	for i := range s.ended {
		if r := s.ended[(s.endNext+i)%len(s.ended)]; r != nil {
			recs = append(recs, r)
		}
	}
	recs = append(recs, s.running...)
	recs = append(recs, s.pending...)
	out := make([]SimJob, 0, len(recs))
	for _, r := range recs {
		j := r.SimJob
		j.Nodes = append([]string(nil), j.Nodes...)
		out = append(out, j)
	}
	// Ended jobs end in any order; ids are submission order.
	sortByID(out)
	return out
}

// OnEvent makes the scheduler call f (under its lock: f must not block)
// when it starts or ends a job, from its next step on.
func (s *Scheduler) OnEvent(f func(JobEvent)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = f
}

func sortByID(js []SimJob) {
	// Ids are decimal numbers without leading zeros.
	slices.SortFunc(js, func(a, b SimJob) int {
		return cmp.Or(cmp.Compare(len(a.ID), len(b.ID)), strings.Compare(a.ID, b.ID))
	})
}

// at returns the run on node i at time t and t's step, advancing the
// scheduler to t first.
func (s *Scheduler) at(i int, t time.Time) (*run, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.begun {
		s.begun, s.t0 = true, t
	}
	k := int64(math.Round(float64(t.Sub(s.t0)) / float64(s.o.Interval)))
	if k > s.step {
		s.advance(k)
	}
	h := &s.hist[i]
	for x := 1; x >= 0; x-- {
		if r := h[x]; r != nil && r.start <= k && k < r.end {
			return r, k
		}
	}
	return nil, k
}

func (s *Scheduler) advance(k int64) {
	if k-s.step > stepsMaxGap && s.step >= 0 {
		s.step = k - stepsMaxGap
	}
	for s.step < k {
		s.step++
		s.stepOnce(s.step)
	}
}

func (s *Scheduler) timeOf(k int64) time.Time {
	return s.t0.Add(time.Duration(k) * s.o.Interval)
}

// stepOnce ends the jobs due, submits new ones and places what fits.
func (s *Scheduler) stepOnce(k int64) {
	kept := s.running[:0]
	for _, j := range s.running {
		if j.r.end > k {
			kept = append(kept, j)
			continue
		}
		j.State, j.ExitCode, j.End = j.plan.endState, j.plan.exitCode, s.timeOf(j.r.end)
		if s.events != nil {
			s.events(JobEvent{Job: j.SimJob})
		}
		for _, i := range j.idx {
			s.free[i] = true
			s.nFree++
		}
		s.retire(j)
	}
	clear(s.running[len(kept):])
	s.running = kept

	busy := func() int {
		b := s.o.Nodes - s.nFree
		for _, j := range s.pending {
			b += j.size
		}
		return b
	}
	target := int(math.Ceil(fillTarget * float64(s.o.Nodes)))
	if k == 0 {
		// Start amid a working day: fill the cluster with jobs that began
		// before the first tick, part way through their runs.
		for tries := 0; busy() < target && len(s.running) < s.o.MaxJobs && tries < 4*s.o.MaxJobs; tries++ {
			j := s.newJob()
			if j.size > s.nFree {
				continue
			}
			elapsed := s.rng.Int64N(j.dur)
			j.Submit = s.timeOf(-elapsed).Add(-time.Duration(s.rng.Int64N(600)) * time.Second)
			s.place(j, -elapsed)
		}
	}
	// Submissions: now and then even when full, so the queue is seen;
	// below the target as many as a big cluster's users send.
	sec := s.o.Interval.Seconds()
	for n := range max(s.o.Nodes/200, 1) {
		p := 0.3 * sec
		if busy() >= target {
			if n > 0 {
				break
			}
			p = 0.01 * sec
		}
		if len(s.pending) >= maxPending {
			break
		}
		if s.rng.Float64() >= p {
			continue
		}
		j := s.newJob()
		j.Submit = s.timeOf(k)
		s.pending = append(s.pending, j)
	}
	waiting := s.pending[:0]
	for _, j := range s.pending {
		if j.size <= s.nFree && len(s.running) < s.o.MaxJobs {
			s.place(j, k)
		} else {
			waiting = append(waiting, j)
		}
	}
	clear(s.pending[len(waiting):])
	s.pending = waiting
}

func (s *Scheduler) retire(j *jobRec) {
	if len(s.ended) < s.o.History {
		s.ended = append(s.ended, j)
		return
	}
	s.ended[s.endNext] = j
	s.endNext = (s.endNext + 1) % len(s.ended)
}

// logUniform draws from [lo, hi] with a log-uniform density (many small,
// few large).
func (s *Scheduler) logUniform(lo, hi float64) float64 {
	return lo * math.Exp(s.rng.Float64()*math.Log(hi/lo))
}

// newJob draws a job: its size, run time, user and what it will do.
func (s *Scheduler) newJob() *jobRec {
	rng := s.rng
	j := &jobRec{}
	j.ID = strconv.Itoa(s.nextID)
	s.nextID++
	u := rng.IntN(len(simUsers))
	j.User, j.Account, j.UID = simUsers[u].name, simUsers[u].account, 20001+u*37
	j.Name = simJobNames[rng.IntN(len(simJobNames))]
	maxSize := max(s.o.Nodes/8, 1)
	j.size = 1
	if maxSize >= 2 && rng.Float64() < 0.5 {
		// Pareto-like: the chance of at least n nodes falls as 1/n, so
		// small jobs are many and a few take an eighth of the cluster.
		m := float64(maxSize)
		j.size = min(int(2/(1-rng.Float64()*(1-2/m))), maxSize)
	}
	runTime := time.Duration(s.logUniform(float64(s.o.MinRun), float64(s.o.MaxRun)))
	pl := &j.plan
	pl.stragRel = -1
	pl.threads = 1 + rng.IntN(2)
	pl.eff = 0.75 + 0.23*rng.Float64()
	if rng.Float64() < 0.15 {
		pl.eff = 0.15 + 0.35*rng.Float64() // asks for more cores than it keeps busy
	}
	memChoices := [...]int64{4, 8, 16, 32, 64}
	pl.memLimit = memChoices[rng.IntN(len(memChoices))] * gib
	pl.memUse = int64(float64(pl.memLimit) * (0.45 + 0.45*rng.Float64()))
	j.MemUsed = float64(pl.memUse) / float64(pl.memLimit)
	pl.growing = rng.Float64() < 0.3
	switch {
	case rng.Float64() < 0.1:
		// Asks for far more memory than it touches.
		pl.memLimit = []int64{96, 128}[rng.IntN(2)] * gib
		pl.memUse = int64(float64(pl.memLimit) * (0.03 + 0.05*rng.Float64()))
		j.MemUsed = float64(pl.memUse) / float64(pl.memLimit)
	case j.size >= 2 && rng.Float64() < 0.3:
		pl.stragRel = rng.IntN(j.size)
	}
	limit := time.Duration(math.Ceil((runTime * time.Duration(12+rng.IntN(19)) / 10).Minutes())) * time.Minute
	pl.endState = "completed"
	switch f := rng.Float64(); {
	case f < 0.04:
		pl.endState, pl.exitCode = "failed", 1
		runTime = time.Duration(float64(runTime) * (0.05 + 0.45*rng.Float64()))
	case f < 0.09:
		pl.endState = "timeout"
		limit = max(time.Duration(math.Round(runTime.Minutes()))*time.Minute, time.Minute)
		runTime = limit
	case f < 0.12 && pl.growing:
		// A leak: memory grows to the limit and the OOM killer ends it.
		pl.endState, pl.exitCode = "oom", 125
		pl.memUse = pl.memLimit
		j.MemUsed = 1
	}
	j.TimeLimit = limit
	j.dur = max(int64(runTime/s.o.Interval), 3)
	pl.inBytes = (0.5 + 19.5*rng.Float64()) * 1e9
	pl.ckptEvery = max(int64((300+rng.IntN(600))*int(time.Second)/int(s.o.Interval)), 10)
	pl.ckptLen = min(3+rng.Int64N(8), pl.ckptEvery/2)
	pl.ckptRate = (100 + 700*rng.Float64()) * 1e6
	pl.readTrick = rng.Float64() * 2e6
	pl.writeTrick = rng.Float64() * 1e6
	j.CPUs = j.size * s.o.CPUs
	j.MemBytes = int64(j.size) * pl.memLimit
	j.CPUEfficiency = pl.eff
	j.Partition = "compute"
	switch {
	case pl.memLimit > 64*gib:
		j.Partition = "bigmem"
	case runTime <= 10*time.Minute && j.size <= 2:
		j.Partition = "debug"
	}
	j.State = "pending"
	return j
}

// jobComm is the command a job named name runs.
func jobComm(name string) string {
	switch name {
	case "lmp_melt":
		return "lmp"
	case "gmx_md":
		return "gmx_mpi"
	case "vasp_relax":
		return "vasp_std"
	case "wrf_d02":
		return "wrf.exe"
	case "namd_apoa1":
		return "namd2"
	case "train.py":
		return "python3"
	case "cp2k_opt":
		return "cp2k.psmp"
	case "openfoam_les":
		return "pimpleFoam"
	case "hpl":
		return "xhpl"
	case "nekrs_pipe":
		return "nekrs"
	case "qe_scf":
		return "pw.x"
	}
	return "bash"
}

// place starts j at step k on the first j.size free nodes.
func (s *Scheduler) place(j *jobRec, k int64) {
	r := &run{plan: j.plan, start: k, end: k + j.dur, straggler: -1, oomNode: -1, uid: float64(j.UID),
		id: j.ID, user: j.User, comm: jobComm(j.Name)}
	for i := 0; i < len(s.free) && len(j.Nodes) < j.size; i++ {
		if !s.free[i] {
			continue
		}
		s.free[i] = false
		s.nFree--
		if len(j.Nodes) == r.stragRel {
			r.straggler = i
			j.Straggler = s.names[i]
		}
		if len(j.Nodes) == 0 && r.endState == "oom" {
			r.oomNode = i
		}
		j.Nodes = append(j.Nodes, s.names[i])
		j.idx = append(j.idx, i)
		s.hist[i] = [2]*run{s.hist[i][1], r}
	}
	for x, si := range jobSeries {
		r.d[x] = metric.NewDesc(si.Name, si.Help, si.Type, "jobid", j.ID)
	}
	j.r = r
	j.State = "running"
	j.Start = s.timeOf(k)
	s.running = append(s.running, j)
	if s.events != nil {
		// j.Nodes is not changed after placing: the event may share it.
		s.events(JobEvent{Start: true, Job: j.SimJob})
	}
}

// SetScheduler makes the node's load follow the jobs s places on it (its
// index i in s, counting from 0): busy CPU, memory and I/O while a job
// runs, idle otherwise, and the jobs plugin's vigil_job_* series.
func (n *Node) SetScheduler(s *Scheduler, i int) {
	n.sched, n.sidx = s, i
	for c := range n.busy {
		n.busy[c] = idleBusy
	}
}

const idleBusy = 0.01

// jobAt looks up the node's job at t; a change resets the job's counters
// and the cores' load.
func (n *Node) jobAt(t time.Time) (*run, int64) {
	r, k := n.sched.at(n.sidx, t)
	if r == n.job {
		return r, k
	}
	if n.job != nil {
		n.gone = n.job
	}
	n.job = r
	busy := idleBusy
	n.jUser, n.jSys, n.jRead, n.jWrit, n.jPeak, n.jHits = 0, 0, 0, 0, 0, 0
	if r != nil {
		busy = r.eff
		if r.straggler == n.sidx {
			busy *= 0.6
		}
		// A job that began before the first tick has run part way.
		if e := k - r.start; e > 0 {
			cpu := float64(e) * 100 * n.sched.o.Interval.Seconds() * busy * float64(len(n.busy))
			n.jUser, n.jSys = int64(cpu*0.95), int64(cpu*0.04)
			n.jRead = r.inBytes + r.readTrick*float64(e)
			n.jWrit = r.writeTrick*float64(e) + float64(e/r.ckptEvery*r.ckptLen)*r.ckptRate
		}
	}
	for c := range n.busy {
		n.busy[c] = busy
	}
	// The top processes: the job's ranks (three of five) while it runs.
	for i := range 3 {
		switch {
		case r != nil:
			n.newJobProc(i, r, busy, r.memUse/int64(len(n.busy)))
		case n.procs[i].job != nil:
			n.newProc(i)
		}
	}
	return r, k
}

// jobIO adds the job's I/O of this tick (to its counters and the node's
// InfiniBand ones) and returns the memory it uses now.
func (n *Node) jobIO(r *run, k int64, sec float64) float64 {
	e, dur := k-r.start, r.end-r.start
	rd, wr := r.readTrick*sec, r.writeTrick*sec
	// Input read at the start, checkpoints written now and then.
	if in := max(min(dur/10, 60), 1); e < in {
		rd += r.inBytes / float64(in)
	}
	if e > 0 && e%r.ckptEvery < r.ckptLen {
		wr += r.ckptRate * sec
	}
	n.jRead += rd
	n.jWrit += wr
	n.state[n.sch.ibRx] += int64(rd)
	n.state[n.sch.ibTx] += int64(wr)

	var used float64
	if r.growing {
		used = float64(r.memUse) * (0.3 + 0.7*float64(e+1)/float64(dur))
	} else {
		used = float64(r.memUse) * min(1, float64(e+1)/30) // loads its data, then flat
	}
	used *= 1 + 0.004*n.rng.NormFloat64()
	used = min(math.Round(used/4096)*4096, float64(r.memLimit))
	n.jPeak = max(n.jPeak, min(used*1.03, float64(r.memLimit)))
	if r.oomNode == n.sidx && float64(e) > 0.9*float64(dur) {
		n.jHits++
	}
	return used
}

// jobSeries adds the series of the jobs plugin: those of the job that
// ended (running 0, once), of the job on the node, and the node's own.
func (n *Node) jobSeries(r *run, k int64, used float64, b *metric.Batch) {
	if g := n.gone; g != nil {
		b.Add(g.d[jRunning], 0)
		n.gone = nil
		n.jEnded++
	}
	nd := &n.sch.jobsNode
	if r == nil {
		b.Add(nd[0], 0)
		b.Add(nd[1], float64(n.jEnded))
		for _, d := range nd[2:] {
			b.Add(d, 0)
		}
		return
	}
	oom := 0.0
	if r.oomNode == n.sidx && k == r.end-1 {
		oom = 1
	}
	cpus := float64(len(n.busy))
	b.Add(r.d[jRunning], 1)
	b.Add(r.d[jCPUUser], float64(n.jUser)/100)
	b.Add(r.d[jCPUSystem], float64(n.jSys)/100)
	b.Add(r.d[jCPUs], cpus)
	b.Add(r.d[jMemUsed], used)
	b.Add(r.d[jMemPeak], n.jPeak)
	b.Add(r.d[jMemLimit], float64(r.memLimit))
	b.Add(r.d[jOOMKills], oom)
	b.Add(r.d[jLimitHits], n.jHits)
	b.Add(r.d[jProcs], cpus)
	b.Add(r.d[jThreads], cpus*float64(r.threads))
	b.Add(r.d[jRead], math.Round(n.jRead))
	b.Add(r.d[jWrite], math.Round(n.jWrit))
	b.Add(r.d[jUID], r.uid)
	b.Add(nd[0], 1)
	b.Add(nd[1], float64(n.jEnded))
	for _, d := range nd[2:] {
		b.Add(d, 0)
	}
}
