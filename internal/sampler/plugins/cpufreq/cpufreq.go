// Package cpufreq samples per-CPU frequencies and governors from
// /sys/devices/system/cpu/cpu*/cpufreq (node_exporter's cpufreq collector).
package cpufreq

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

// DefaultInterval is longer than the sampler's: reading a CPU's current
// frequency can interrupt that CPU, which a tightly coupled job notices.
const DefaultInterval = 10 * time.Second

func init() {
	sampler.Register(sampler.Registration{
		Name:        "cpufreq",
		Description: "per-CPU frequency and governor from /sys/devices/system/cpu",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &sampler.Common{Interval: sampler.Duration(DefaultInterval)}
		},
		New:          func(sampler.Configurable) sampler.Plugin { return &Cpufreq{} },
		SampleConfig: sampleConfig,
	})
}

// The kHz attributes, in node_exporter's order.
var freqs = [...]struct{ file, name, help string }{
	{"cpuinfo_cur_freq", "frequency_hertz", "Current CPU thread frequency in hertz."},
	{"cpuinfo_min_freq", "frequency_min_hertz", "Minimum CPU thread frequency in hertz."},
	{"cpuinfo_max_freq", "frequency_max_hertz", "Maximum CPU thread frequency in hertz."},
	{"scaling_cur_freq", "scaling_frequency_hertz", "Current scaled CPU thread frequency in hertz."},
	{"scaling_min_freq", "scaling_frequency_min_hertz", "Minimum scaled CPU thread frequency in hertz."},
	{"scaling_max_freq", "scaling_frequency_max_hertz", "Maximum scaled CPU thread frequency in hertz."},
}

// maxGovernors bounds the governors listed per CPU (kernels offer up to 6).
const maxGovernors = 16

type attr struct {
	f      *kernfs.File
	d      *metric.Desc
	absent bool // no such file, or not readable (cpuinfo_cur_freq is root-only)
}

type cpu struct {
	id        string
	freqs     [len(freqs)]attr
	governor  *kernfs.File
	available *kernfs.File
	prevAvail []byte
	govNames  [][]byte
	govDescs  []*metric.Desc
}

// Cpufreq is the cpufreq plugin.
type Cpufreq struct {
	cpus []*cpu
}

// Init lists the CPUs that have a cpufreq directory.
func (c *Cpufreq) Init(env sampler.Env) error {
	dirs, _ := filepath.Glob(env.FS.Path("sys", "devices", "system", "cpu", "cpu[0-9]*", "cpufreq"))
	num := func(p string) int {
		n, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(p)), "cpu"))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return num(dirs[i]) < num(dirs[j]) })
	for _, dir := range dirs {
		id := strconv.Itoa(num(dir))
		p := &cpu{id: id,
			governor:  kernfs.NewFile(filepath.Join(dir, "scaling_governor"), 64),
			available: kernfs.NewFile(filepath.Join(dir, "scaling_available_governors"), 256),
		}
		for i, f := range freqs {
			p.freqs[i] = attr{f: kernfs.NewFile(filepath.Join(dir, f.file), 32),
				d: metric.NewDesc("node_cpu_"+f.name, f.help, metric.Gauge, "cpu", id)}
		}
		c.cpus = append(c.cpus, p)
	}
	if len(c.cpus) == 0 {
		return sampler.ErrNotAvailable // no cpufreq driver (most VMs): the plugin is left out
	}
	return nil
}

// Sample reads every CPU's frequencies and governor. An attribute the
// driver lacks, or that only root may read, is left out.
func (c *Cpufreq) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if len(c.cpus) == 0 {
		return sampler.ErrNotAvailable
	}
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	for _, p := range c.cpus {
		for i := range p.freqs {
			a := &p.freqs[i]
			if a.absent {
				continue
			}
			data, err := a.f.Read()
			if err != nil {
				a.absent = errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)
				if !a.absent {
					keep(err)
				}
				continue
			}
			v, err := ParseKHz(data)
			if err != nil {
				keep(fmt.Errorf("%s: %w", a.f.Path(), err))
				continue
			}
			b.Add(a.d, float64(v)*1000.0)
		}
		if err := p.governors(b); err != nil {
			keep(err)
		}
	}
	return first
}

// governors emits node_cpu_scaling_governor: 1 for the governor in use,
// 0 for the other available ones.
func (p *cpu) governors(b *metric.Batch) error {
	avail, err := p.available.Read()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.prevAvail == nil || !bytes.Equal(avail, p.prevAvail) {
		p.prevAvail = append(p.prevAvail[:0], avail...)
		p.govNames, p.govDescs = p.govNames[:0], p.govDescs[:0]
		line, _ := kernfs.NextLine(p.prevAvail)
		for len(line) > 0 && len(p.govNames) < maxGovernors {
			var g []byte
			if g, line = kernfs.NextField(line); len(g) == 0 {
				break
			}
			p.govNames = append(p.govNames, g)
			p.govDescs = append(p.govDescs, metric.NewDesc("node_cpu_scaling_governor",
				"Current enabled CPU frequency governor.", metric.Gauge, "cpu", p.id, "governor", string(g)))
		}
	}
	cur, err := p.governor.Read()
	if err != nil {
		return err
	}
	line, _ := kernfs.NextLine(cur)
	line = kernfs.TrimSpace(line)
	for i, g := range p.govNames {
		v := 0.0
		if bytes.Equal(g, line) {
			v = 1
		}
		b.Add(p.govDescs[i], v)
	}
	return nil
}

// ParseKHz reads a kHz attribute.
func ParseKHz(data []byte) (uint64, error) {
	line, _ := kernfs.NextLine(data)
	line = kernfs.TrimSpace(line)
	v, err := kernfs.ParseUint(line)
	if err != nil {
		if len(line) > 20 {
			line = line[:20]
		}
		return 0, fmt.Errorf("%q: want kHz", line)
	}
	return v, nil
}
