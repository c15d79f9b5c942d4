// Package processes counts processes and threads by state (node_exporter's
// processes collector, off by default there and here): it reads every
// /proc/<pid>/stat and every /proc/<pid>/task/<tid>/stat.
package processes

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval: a tick opens one file per thread on the node.
const DefaultInterval = 10 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "processes",
		Description: "processes and threads by state, PID and thread limits",
		Default:     false,
		NewConfig: func() sampler.Configurable {
			c := &Config{MaxThreads: 1 << 20}
			c.Interval = sampler.Duration(DefaultInterval)
			return c
		},
		New:          func(c sampler.Configurable) sampler.Plugin { return &Processes{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.processes] table.
type Config struct {
	sampler.Common
	// MaxThreads bounds the thread stat files read per tick.
	MaxThreads int `toml:"max_threads"`
}

// Validate checks the bound.
func (c *Config) Validate() error {
	if c.MaxThreads < 1 {
		return fmt.Errorf("max_threads must be at least 1, got %d", c.MaxThreads)
	}
	return nil
}

// Counts is one tick's tally.
type Counts struct {
	PIDs, Threads int
	State         [256]int // processes by stat state letter
	ThreadState   [256]int
	Truncated     bool // MaxThreads reached
	threadsRead   int
}

// Processes is the processes plugin.
type Processes struct {
	cfg                     Config
	walker                  walker
	pidMax, threadsMax      *kernfs.File
	maxProcDesc, maxThrDesc *metric.Desc
	pidsDesc, threadsDesc   *metric.Desc
	stateDescs, thrDescs    [256]*metric.Desc
	counts                  Counts
	warned                  bool
}

// Init resolves <root>/proc.
func (p *Processes) Init(env sampler.Env) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	p.walker.init(env.FS.Path("proc"))
	p.pidMax = kernfs.NewFile(env.FS.Path("proc", "sys", "kernel", "pid_max"), 64)
	p.threadsMax = kernfs.NewFile(env.FS.Path("proc", "sys", "kernel", "threads-max"), 64)
	p.pidMax.NonBlocking, p.threadsMax.NonBlocking = true, true
	p.maxProcDesc = metric.NewDesc("node_processes_max_processes", "Number of max PIDs limit", metric.Gauge)
	p.maxThrDesc = metric.NewDesc("node_processes_max_threads", "Limit of threads in the system", metric.Gauge)
	p.pidsDesc = metric.NewDesc("node_processes_pids", "Number of PIDs", metric.Gauge)
	p.threadsDesc = metric.NewDesc("node_processes_threads", "Allocated threads in system", metric.Gauge)
	return nil
}

// Sample walks /proc. Processes and threads that exit during the walk are
// skipped, as node_exporter does.
func (p *Processes) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	p.counts = Counts{}
	if err := p.walker.walk(&p.counts, p.cfg.MaxThreads); err != nil {
		return err
	}
	b.Add(p.threadsDesc, float64(p.counts.Threads))
	for s, n := range p.counts.State {
		if n > 0 {
			b.Add(desc(&p.stateDescs, s, "node_processes_state", "Number of processes in each state.", "state"), float64(n))
		}
	}
	for s, n := range p.counts.ThreadState {
		if n > 0 {
			b.Add(desc(&p.thrDescs, s, "node_processes_threads_state", "Number of threads in each state.", "thread_state"), float64(n))
		}
	}
	b.Add(p.pidsDesc, float64(p.counts.PIDs))
	var err error
	for _, l := range [2]struct {
		f *kernfs.File
		d *metric.Desc
	}{{p.pidMax, p.maxProcDesc}, {p.threadsMax, p.maxThrDesc}} {
		v, rerr := readUint(l.f)
		if rerr != nil {
			err = errors.Join(err, rerr)
			continue
		}
		b.Add(l.d, float64(v))
	}
	if p.counts.Truncated && !p.warned {
		p.warned = true // reported once per run
		err = errors.Join(err, fmt.Errorf("more than max_threads = %d threads: thread states undercounted", p.cfg.MaxThreads))
	}
	return err
}

func desc(cache *[256]*metric.Desc, state int, name, help, label string) *metric.Desc {
	if cache[state] == nil {
		cache[state] = metric.NewDesc(name, help, metric.Gauge, label, string(rune(state)))
	}
	return cache[state]
}

func readUint(f *kernfs.File) (uint64, error) {
	data, err := f.Read()
	if err != nil {
		return 0, err
	}
	line, _ := kernfs.NextLine(data)
	v, err := kernfs.ParseUint(kernfs.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("%s: want an integer", f.Path())
	}
	return v, nil
}

// ParseStat returns the state letter and thread count of a
// /proc/<pid>/stat line. The command may hold spaces and parentheses, so
// the fields start after the last ')'.
func ParseStat(data []byte) (state byte, threads int, err error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, errors.New("no ')' after the command")
	}
	rest := data[i+1:]
	// After ')': state (field 3) … num_threads (field 20).
	var f []byte
	for n := 3; n <= 20; n++ {
		if f, rest = kernfs.NextField(rest); len(f) == 0 {
			return 0, 0, fmt.Errorf("%d fields, want at least 20", n-1)
		}
		switch n {
		case 3:
			if len(f) != 1 {
				return 0, 0, fmt.Errorf("state %q: want one letter", f)
			}
			state = f[0]
		case 20:
			v, perr := kernfs.ParseUint(f)
			if perr != nil || v > 1<<31 {
				return 0, 0, fmt.Errorf("num_threads %q: want an integer", f)
			}
			threads = int(v)
		}
	}
	return state, threads, nil
}
