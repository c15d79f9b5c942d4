package jobs

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// Options configure a Manager.
type Options struct {
	// Dir is the index's directory (<data>/jobs).
	Dir string
	// Interval is the nodes' sampling interval: a job silent on all its
	// nodes for 3 of them has ended.
	Interval time.Duration
	// Slurm, if set, completes the index from Slurm's own commands.
	Slurm *SlurmOptions
	// OnEnd, if set, is called (from Run's goroutine) with each job the
	// nodes report ended, after it is stored; SetSummary stores what it
	// computes.
	OnEnd func(j *Job)
	// Events turns POST /api/v1/jobs/{id}/event (vigil job-event) on.
	Events bool
	// EventSink gets job_start and job_end events, whoever said so (the
	// nodes, Slurm, vigil job-event); nil: none. (Events is the job-event
	// API's switch.)
	EventSink events.Sink
	// MaxLive bounds the jobs tracked as running (0: 100,000).
	MaxLive    int
	Registerer prometheus.Registerer // nil: not registered
	Logger     *slog.Logger
}

// Manager keeps the index and fills it: a tap on ingest (Schema, Tick)
// sees which jobs run where, Run stores what changed every interval and
// polls Slurm.
type Manager struct {
	idx      *Index
	log      *slog.Logger
	interval time.Duration
	maxLive  int
	onEnd    func(*Job)
	events   bool
	sink     events.Sink
	slurm    *slurmPoller

	tapMu sync.Mutex
	nodes map[string][]streamTap // per node, per stream of it
	live  map[string]*liveJob

	wmu  sync.Mutex    // serialises read-modify-write of the index
	wake chan struct{} // a job or node appeared: store it before the interval ends

	m metrics
}

type streamTap struct {
	first *metric.Desc
	n     int
	idx   []int32 // positions of vigil_job_running
	descs []*metric.Desc
	ids   []string // their jobid
}

type liveJob struct {
	nodes  map[string]*liveNode
	dirty  bool
	stored bool // since it was first seen: Nodes are the nodes' names
}

type liveNode struct {
	first, last time.Time // sample times of running 1
	end         time.Time // of running 0
	heard       time.Time // server time of the last tick
	ended       bool
}

type metrics struct {
	jobsG, liveG                         prometheus.Gauge
	schedErrorsC, droppedC, writeErrorsC prometheus.Counter
}

// New opens the index in o.Dir.
func New(o Options) (*Manager, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	idx, err := Open(o.Dir, log)
	if err != nil {
		return nil, err
	}
	m := &Manager{idx: idx, log: log, interval: o.Interval, maxLive: o.MaxLive, onEnd: o.OnEnd, events: o.Events,
		nodes: map[string][]streamTap{}, live: map[string]*liveJob{}, wake: make(chan struct{}, 1)}
	if m.interval <= 0 {
		m.interval = time.Second
	}
	if m.sink = o.EventSink; m.sink == nil {
		m.sink = events.Discard
	}
	if m.maxLive <= 0 {
		m.maxLive = 100000
	}
	m.m.jobsG = prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_jobs_indexed", Help: "Jobs in the job index."})
	m.m.liveG = prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_jobs_running_seen", Help: "Jobs the nodes report running."})
	m.m.schedErrorsC = prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_jobs_scheduler_errors_total", Help: "Slurm commands that failed, timed out or answered what could not be read."})
	m.m.droppedC = prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_jobs_untracked_total", Help: "Job sightings ignored because max live jobs were tracked."})
	m.m.writeErrorsC = prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_jobs_index_errors_total", Help: "Job index writes that failed."})
	m.m.jobsG.Set(float64(idx.Len()))
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{m.m.jobsG, m.m.liveG, m.m.schedErrorsC, m.m.droppedC, m.m.writeErrorsC} {
			if err := o.Registerer.Register(c); err != nil {
				idx.Close()
				return nil, err
			}
		}
	}
	if o.Slurm != nil {
		m.slurm = newSlurmPoller(*o.Slurm, m)
	} else if err := m.restore(); err != nil {
		idx.Close()
		return nil, err
	}
	return m, nil
}

// restore tracks again the jobs the index has running, as if just heard
// on their nodes: those no node reports within 3 intervals ended while
// the server was away (at about its start). With Slurm on, Slurm says.
func (m *Manager) restore() error {
	running, err := m.idx.List(Filter{State: StateRunning, Limit: MaxLimit})
	if err != nil {
		return err
	}
	now := time.Now()
	for _, j := range running {
		if len(j.Nodes) == 0 || len(m.live) >= m.maxLive {
			continue
		}
		lj := &liveJob{nodes: map[string]*liveNode{}, stored: true}
		for _, n := range j.Nodes {
			lj.nodes[n] = &liveNode{first: j.Start, last: now, heard: now}
		}
		m.live[j.ID] = lj
	}
	return nil
}

// DefaultDir is the index's directory under a data directory.
func DefaultDir(data string) string { return filepath.Join(data, "jobs") }

// Index is the manager's index.
func (m *Manager) Index() *Index { return m.idx }

// Close closes the index.
func (m *Manager) Close() error { return m.idx.Close() }

// Schema implements ingest's tap: a stream of node changed its series,
// so the cached positions of its job series are stale.
func (m *Manager) Schema(node string, _ []*metric.Desc) {
	m.tapMu.Lock()
	delete(m.nodes, node)
	m.tapMu.Unlock()
}

const maxStreamsPerNode = 16

// Tick implements ingest's tap. It finds the tick's vigil_job_running
// series from a per-stream cache (a scan only after a schema change),
// so a tick without jobs costs a map lookup. It returns the jobs the tick
// reports ended (running 0), nil (no allocation) when none.
func (m *Manager) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) (ended []string) {
	if len(descs) == 0 || len(values) != len(descs) {
		return nil
	}
	m.tapMu.Lock()
	defer m.tapMu.Unlock()
	streams := m.nodes[node]
	var st *streamTap
	for i := range streams {
		s := &streams[i]
		if s.first == descs[0] && s.n == len(descs) && s.valid(descs) {
			st = s
			break
		}
	}
	if st == nil {
		if len(streams) >= maxStreamsPerNode {
			streams = streams[1:]
		}
		streams = append(streams, scanStream(descs))
		m.nodes[node] = streams
		st = &streams[len(streams)-1]
	}
	if len(st.idx) == 0 {
		return nil
	}
	now := time.Now()
	for k, i := range st.idx {
		m.seen(st.ids[k], node, t, now, values[i] != 0)
		if values[i] == 0 {
			ended = append(ended, st.ids[k])
		}
	}
	return ended
}

func (s *streamTap) valid(descs []*metric.Desc) bool {
	for k, i := range s.idx {
		if descs[i] != s.descs[k] {
			return false
		}
	}
	return true
}

func scanStream(descs []*metric.Desc) streamTap {
	s := streamTap{first: descs[0], n: len(descs)}
	for i, d := range descs {
		if d.Name != "vigil_job_running" {
			continue
		}
		for _, l := range d.Labels {
			if l.Name == "jobid" && ValidID(l.Value) {
				s.idx = append(s.idx, int32(i))
				s.descs = append(s.descs, d)
				s.ids = append(s.ids, l.Value)
			}
		}
	}
	return s
}

// seen notes a job's running value on node; m.tapMu held.
func (m *Manager) seen(id, node string, t, now time.Time, running bool) {
	j := m.live[id]
	if j == nil {
		if !running {
			return // an end we did not see start: the next sweep has nothing to add
		}
		if len(m.live) >= m.maxLive {
			m.m.droppedC.Inc()
			return
		}
		j = &liveJob{nodes: map[string]*liveNode{}}
		m.live[id] = j
		if m.slurm != nil {
			m.slurm.poke() // fetch its user, partition, ... soon
		}
	}
	n := j.nodes[node]
	if n == nil {
		if !running {
			return
		}
		if len(j.nodes) >= MaxNodes {
			return
		}
		n = &liveNode{first: t}
		j.nodes[node] = n
		j.dirty = true
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	n.heard = now
	if running {
		n.last = t
		if n.ended {
			n.ended, j.dirty = false, true
		}
	} else if !n.ended {
		n.ended, n.end, j.dirty = true, t, true
	}
}

// Run stores what the nodes reported every interval and, if configured,
// polls Slurm, until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if m.slurm != nil {
		wg.Add(1)
		go func() { defer wg.Done(); m.slurm.run(ctx) }()
	}
	t := time.NewTicker(m.interval)
	defer t.Stop()
	var woke time.Time
	for {
		select {
		case <-ctx.Done():
			m.sweep(time.Now(), false)
			wg.Wait()
			return
		case now := <-t.C:
			m.sweep(now, true)
		case <-m.wake:
			// New jobs are listed at once, but a burst of them costs
			// at most 10 sweeps a second.
			if d := time.Until(woke.Add(100 * time.Millisecond)); d > 0 {
				select {
				case <-ctx.Done():
					continue
				case <-time.After(d):
				}
			}
			woke = time.Now()
			m.sweep(woke, false)
		}
	}
}

type change struct {
	id    string
	first bool // the first store since the job was seen
	nodes []string
	start time.Time
	end   time.Time // zero: running
}

// sweep stores the jobs whose nodes changed and ends those over on all
// their nodes (a 0, or silence for 3 intervals; only when judge).
func (m *Manager) sweep(now time.Time, judge bool) {
	var changes []change
	m.tapMu.Lock()
	for id, j := range m.live {
		over := true
		var c change
		for name, n := range j.nodes {
			c.nodes = append(c.nodes, name)
			if c.start.IsZero() || n.first.Before(c.start) {
				c.start = n.first
			}
			switch {
			case n.ended:
				c.end = later(c.end, n.end)
			case judge && now.Sub(n.heard) > 3*m.interval:
				c.end = later(c.end, n.last)
			default:
				over = false
			}
		}
		if !over {
			c.end = time.Time{}
		}
		if !j.dirty && !over {
			continue
		}
		c.id, c.first = id, !j.stored
		j.dirty, j.stored = false, true
		if over {
			delete(m.live, id)
		}
		changes = append(changes, c)
	}
	m.m.liveG.Set(float64(len(m.live)))
	m.tapMu.Unlock()
	for _, c := range changes {
		slices.Sort(c.nodes)
		j, err := m.Update(c.id, func(j *Job) {
			switch {
			case c.first:
				// Node labels replace the scheduler's names (the same
				// hosts, maybe spelt otherwise). After a restart, a
				// running job's other nodes join at their next ticks.
				j.Nodes = c.nodes
			case !slices.Equal(j.Nodes, c.nodes):
				j.Nodes = mergeNodes(j.Nodes, c.nodes)
			}
			if j.Start.IsZero() || (!c.start.IsZero() && c.start.Before(j.Start)) {
				j.Start = c.start
			}
			if j.State == "" || j.State == StatePending {
				j.State = StateRunning
			}
			if !c.end.IsZero() {
				if j.End.IsZero() {
					j.End = c.end
				}
				if !j.State.Final() {
					j.State = StateEnded
				}
			}
		})
		if err != nil || c.end.IsZero() {
			continue
		}
		if m.slurm != nil && !j.State.Final() {
			m.slurm.await(c.id)
		}
		if m.onEnd != nil {
			m.onEnd(j)
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// mergeNodes returns the union of a and b, sorted; b is the nodes' word.
func mergeNodes(a, b []string) []string {
	out := slices.Clone(b)
	for _, n := range a {
		if _, ok := slices.BinarySearch(b, n); !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Update applies fn to the job (a new one if the index does not know
// it) and stores the result if it changed.
func (m *Manager) Update(id string, fn func(j *Job)) (*Job, error) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	j, err := m.idx.Get(id)
	if err != nil {
		m.m.writeErrorsC.Inc()
		return nil, err
	}
	var before []byte
	var was State
	if j == nil {
		j = &Job{ID: id}
	} else {
		before, was = appendJob(nil, j), j.State
	}
	fn(j)
	if bytes.Equal(before, appendJob(nil, j)) {
		return j, nil
	}
	if err := m.idx.Upsert(j); err != nil {
		m.m.writeErrorsC.Inc()
		m.log.Warn("job index: store failed", "job", id, "err", err)
		return nil, err
	}
	m.m.jobsG.Set(float64(m.idx.Len()))
	m.emit(j, was)
	return j, nil
}

// SetSummary stores a job's summary (at its end).
func (m *Manager) SetSummary(id string, s *Summary) error {
	_, err := m.Update(id, func(j *Job) { j.Summary = s })
	return err
}
