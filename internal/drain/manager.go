package drain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/events"
)

// Options configure a Manager.
type Options struct {
	// Dir keeps the state file drain.json (the failing checks and the
	// nodes Vigil drained), so a restart remembers them; "" keeps nothing.
	Dir string
	// Events takes the health_fail, health_pass, drain and resume events
	// (nil: dropped).
	Events events.Sink
	// Scheduler, if set, drains failing nodes and resumes those Vigil
	// drained once every check passes (--drain-on-health).
	Scheduler Scheduler
	// Retry is how long a scheduler command that failed waits before it
	// is tried again (0: 30s).
	Retry time.Duration
	// MaxNodes bounds the nodes followed (0: 200,000).
	MaxNodes   int
	Registerer prometheus.Registerer // nil: not registered
	Logger     *slog.Logger
}

// StateFile is the state's file name in Options.Dir.
const StateFile = "drain.json"

// maxStateFile bounds the state file read at start.
const maxStateFile = 256 << 20

// Manager follows the nodes' health checks (an ingest tap) and, with a
// Scheduler, drains and resumes them.
type Manager struct {
	log      *slog.Logger
	events   events.Sink
	dir      string
	maxNodes int

	mu    sync.RWMutex // guards nodes (the map; each node has its own lock)
	nodes map[string]*node

	drainer *drainer          // nil without a Scheduler
	keep    map[string]Record // without one: the drained nodes on record, kept as they were
	dirty   atomic.Bool       // the state file is behind
	saveMu  sync.Mutex        // one save at a time
	m       metrics
}

type metrics struct {
	transitions prometheus.Counter
	untracked   prometheus.Counter
	failingG    prometheus.GaugeFunc
	actions     *prometheus.CounterVec
	errors      *prometheus.CounterVec
	drainedG    prometheus.GaugeFunc
}

// New returns a manager with the state Options.Dir kept.
func New(o Options) (*Manager, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{log: log, events: o.Events, dir: o.Dir, maxNodes: o.MaxNodes, nodes: map[string]*node{}}
	if m.events == nil {
		m.events = events.Discard
	}
	if m.maxNodes <= 0 {
		m.maxNodes = 200000
	}
	m.m.transitions = prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_health_transitions_total",
		Help: "Changes of state (fail or pass) of the nodes' health checks."})
	m.m.untracked = prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_health_untracked_ticks_total",
		Help: "Ticks of nodes beyond the bound on nodes followed, ignored."})
	m.m.failingG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_health_failing_nodes",
		Help: "Nodes with a failing health check."}, func() float64 { return float64(m.failingNodes()) })
	m.m.actions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_drain_actions_total",
		Help: "Nodes Vigil drained or resumed in the scheduler."}, []string{"op"})
	m.m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_drain_errors_total",
		Help: "Scheduler commands that failed or timed out (retried later)."}, []string{"op"})
	for _, op := range []string{opDrain, opResume} {
		m.m.actions.WithLabelValues(op)
	}
	for _, op := range []string{opShow, opDrain, opResume} {
		m.m.errors.WithLabelValues(op)
	}
	var rec map[string]Record
	if o.Dir != "" {
		var err error
		if rec, err = m.load(filepath.Join(o.Dir, StateFile)); err != nil {
			return nil, err
		}
	}
	if o.Scheduler != nil {
		m.drainer = newDrainer(m, o.Scheduler, o.Retry, rec)
	} else if len(rec) > 0 {
		m.log.Warn("nodes drained by vigil are left as they are: --drain-on-health is off", "nodes", len(rec))
		m.keep = rec
	}
	m.m.drainedG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_drain_nodes",
		Help: "Nodes drained by Vigil and not resumed yet."}, func() float64 { return float64(len(m.Drained())) })
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{m.m.transitions, m.m.untracked, m.m.failingG, m.m.actions, m.m.errors, m.m.drainedG} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// state is the state file's content.
type state struct {
	// Failing lists each node's failing checks (their since survives a
	// restart; a node passing when it is next heard gets its pass events).
	Failing map[string][]Check `json:"failing"`
	// Drained lists the nodes Vigil drained and has not resumed.
	Drained map[string]Record `json:"drained"`
}

// Record is a node Vigil drained.
type Record struct {
	Reason string    `json:"reason"` // as given to the scheduler
	Time   time.Time `json:"time"`
}

// load reads the state file; a missing file is an empty state.
func (m *Manager) load(path string) (map[string]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("health state: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateFile+1))
	if err != nil {
		return nil, fmt.Errorf("health state: %w", err)
	}
	if len(b) > maxStateFile {
		return nil, fmt.Errorf("health state %s: longer than %d bytes", path, maxStateFile)
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		// Written by rename, so only a foreign hand breaks it. Starting
		// without it errs on the safe side: nodes Vigil drained stay
		// drained (no record, no resume) until an admin resumes them.
		bad := path + ".bad"
		if rerr := os.Rename(path, bad); rerr != nil {
			return nil, fmt.Errorf("health state %s: %w, and cannot move it aside: %w", path, err, rerr)
		}
		m.log.Warn("health state unreadable, moved aside; starting without it: nodes vigil drained stay drained",
			"file", path, "moved_to", bad, "err", err)
		return nil, nil
	}
	now := time.Now()
	for name, checks := range s.Failing {
		if len(m.nodes) >= m.maxNodes {
			break
		}
		n := &node{from: now}
		for _, c := range checks {
			if c.Check == "" || len(n.checks) >= maxChecksPerNode {
				continue
			}
			// seen: now, so a check no longer reported is swept in time.
			n.checks = append(n.checks, checkState{name: clean(c.Check, maxCheckName), failing: true,
				reason: clean(c.Reason, maxReason), since: c.Since, seen: now})
		}
		m.nodes[name] = n
	}
	return s.Drained, nil
}

// save writes the state file if it is behind: a temporary file, synced,
// renamed over the old one.
func (m *Manager) save() error {
	if m.dir == "" || !m.dirty.Swap(false) {
		return nil
	}
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	s := state{Failing: m.AllFailing(), Drained: m.Drained()}
	b, err := json.Marshal(s)
	if err == nil {
		err = writeFile(filepath.Join(m.dir, StateFile), b)
	}
	if err != nil {
		m.dirty.Store(true) // try again at the next save
		return fmt.Errorf("health state: %w", err)
	}
	return nil
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Drained returns the nodes Vigil drained and has not resumed.
func (m *Manager) Drained() map[string]Record {
	if m.drainer != nil {
		return m.drainer.records()
	}
	out := make(map[string]Record, len(m.keep))
	for k, v := range m.keep {
		out[k] = v
	}
	return out
}

// Run sweeps checks the nodes stopped reporting, keeps the state file
// and, with a Scheduler, drains and resumes nodes, until ctx ends; it
// saves the state before it returns.
func (m *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if m.drainer != nil {
		wg.Add(1)
		go func() { defer wg.Done(); m.drainer.run(ctx) }()
	}
	save := time.NewTicker(time.Second)
	defer save.Stop()
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	var lastErr string
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-save.C:
		case <-sweep.C:
			m.sweep()
		}
		if err := m.save(); err != nil && err.Error() != lastErr {
			lastErr = err.Error()
			m.log.Warn("cannot keep the health state; retrying", "err", err)
		} else if err == nil {
			lastErr = ""
		}
	}
	wg.Wait()
	if err := m.save(); err != nil {
		m.log.Warn("cannot keep the health state", "err", err)
	}
}
