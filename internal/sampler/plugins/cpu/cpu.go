// Package cpu samples /proc/stat: per-CPU times (node_exporter's cpu
// collector) and the kernel counters of its stat collector.
package cpu

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "cpu",
		Description:  "per-CPU times, boot time, context switches, forks, interrupts and run queue from /proc/stat",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &CPU{} },
		SampleConfig: sampleConfig,
	})
}

// userHZ is the unit of /proc/stat times. The kernel reports them in
// USER_HZ, which is 100 on every Linux architecture node_exporter supports
// (it hard-codes the same value).
const userHZ = 100

// jumpBack is how far (in jiffies: 3 s) idle time may go backwards before
// the CPU is taken to have been hot-plugged and its counters restart, as in
// node_exporter; smaller steps back are ignored.
const jumpBack = 3 * userHZ

// modes are the mode label values of node_cpu_seconds_total by column.
var modes = [Guest]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}

// perCPU is the state kept for one CPU number.
type perCPU struct {
	descs [NumTimes]*metric.Desc // seconds by mode, then guest user and guest nice
	// last holds the values last emitted: a column that goes backwards keeps
	// its old value, so counters stay monotonic (node_exporter does the same).
	last [NumTimes]uint64
	seen uint64 // tick number that last saw this CPU
}

// CPU is the cpu plugin.
type CPU struct {
	file    *kernfs.File
	stat    Stat
	cpus    []*perCPU // by CPU number; nil until first seen
	tick    uint64
	scalars [len(scalars)]*metric.Desc
}

// Init resolves /proc/stat under the root; the file is opened on first Sample.
func (c *CPU) Init(env sampler.Env) error {
	c.file = kernfs.NewFile(env.FS.Path("proc", "stat"), 8192)
	c.file.NonBlocking = true // a system-wide /proc file: raw reads (kernfs.File)
	c.scalars = [...]*metric.Desc{
		metric.NewDesc("node_boot_time_seconds", "Node boot time, in unixtime.", metric.Gauge),
		metric.NewDesc("node_context_switches_total", "Total number of context switches.", metric.Counter),
		metric.NewDesc("node_forks_total", "Total number of forks.", metric.Counter),
		metric.NewDesc("node_intr_total", "Total number of interrupts serviced.", metric.Counter),
		metric.NewDesc("node_procs_running", "Number of processes in runnable state.", metric.Gauge),
		metric.NewDesc("node_procs_blocked", "Number of processes blocked waiting for I/O to complete.", metric.Gauge),
	}
	return nil
}

// Sample reads /proc/stat once and emits everything that parsed, even when
// some lines did not (the error then names the file and the first bad line).
func (c *CPU) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := c.file.Read()
	if err != nil {
		return err
	}
	perr := Parse(data, &c.stat)
	c.tick++
	dup := -1
	for i := range c.stat.CPUs {
		t := &c.stat.CPUs[i]
		p := c.state(t.ID)
		if p.seen == c.tick {
			dup = t.ID // a second line for the same CPU would duplicate its series
			continue
		}
		if p.seen != c.tick-1 {
			p.last = [NumTimes]uint64{} // (re)appeared: start afresh
		}
		p.seen = c.tick
		p.update(&t.Jiffies)
		for m, d := range p.descs {
			b.Add(d, float64(p.last[m])/userHZ)
		}
	}
	values := [len(scalars)]uint64{c.stat.BootTime, c.stat.ContextSwitches, c.stat.Forks,
		c.stat.Interrupts, c.stat.ProcsRunning, c.stat.ProcsBlocked}
	for i, d := range c.scalars {
		if c.stat.Found&(1<<i) != 0 {
			b.Add(d, float64(values[i]))
		}
	}
	switch {
	case perr != nil:
		return fmt.Errorf("%s: %w", c.file.Path(), perr)
	case dup >= 0:
		return fmt.Errorf("%s: cpu%d listed twice: %w", c.file.Path(), dup, ErrFormat)
	}
	return nil
}

// state returns the state of CPU id, creating it (and its descriptors) the
// first time the CPU appears.
func (c *CPU) state(id int) *perCPU {
	if id >= len(c.cpus) {
		c.cpus = append(c.cpus, make([]*perCPU, id+1-len(c.cpus))...)
	}
	if p := c.cpus[id]; p != nil {
		return p
	}
	p := &perCPU{}
	label := strconv.Itoa(id)
	for m, mode := range modes {
		p.descs[m] = metric.NewDesc("node_cpu_seconds_total", "Seconds the CPUs spent in each mode.",
			metric.Counter, "cpu", label, "mode", mode)
	}
	const guestHelp = "Seconds the CPUs spent in guests (VMs) for each mode."
	p.descs[Guest] = metric.NewDesc("node_cpu_guest_seconds_total", guestHelp, metric.Counter, "cpu", label, "mode", "user")
	p.descs[GuestNice] = metric.NewDesc("node_cpu_guest_seconds_total", guestHelp, metric.Counter, "cpu", label, "mode", "nice")
	c.cpus[id] = p
	return p
}

// update folds a new reading into last. Idle going back by jumpBack or
// more means the CPU went offline and came back with fresh counters; any
// other column going back (iowait does on some kernels) keeps its old value.
func (p *perCPU) update(now *[NumTimes]uint64) {
	if p.last[Idle] > now[Idle] && p.last[Idle]-now[Idle] >= jumpBack {
		p.last = [NumTimes]uint64{}
	}
	for m, v := range now {
		if v >= p.last[m] {
			p.last[m] = v
		}
	}
}
