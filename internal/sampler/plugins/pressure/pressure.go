// Package pressure exports pressure stall information from /proc/pressure
// (node_exporter's pressure collector).
package pressure

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "pressure",
		Description:  "pressure stall totals from /proc/pressure",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Pressure{} },
		SampleConfig: sampleConfig,
	})
}

// resource is one /proc/pressure file and the series its lines feed
// (nil where node_exporter exports nothing: cpu "full" is not a stall the
// kernel tracks system-wide, irq has only "full").
type resource struct {
	name       string
	some, full *metric.Desc
	file       *kernfs.File
	absent     bool // the file did not exist at the last look
}

// Pressure is the pressure plugin.
type Pressure struct {
	res  [4]resource
	tick uint64
}

// retryAbsentEvery ticks a missing file is looked for again (PSI can be
// enabled at run time through cgroup settings on some kernels).
const retryAbsentEvery = 64

func desc(name, help string) *metric.Desc {
	return metric.NewDesc("node_pressure_"+name, help, metric.Counter)
}

// Init resolves the four files under the root.
func (p *Pressure) Init(env sampler.Env) error {
	p.res = [4]resource{
		{name: "cpu", some: desc("cpu_waiting_seconds_total", "Total time in seconds that processes have waited for CPU time")},
		{name: "io",
			some: desc("io_waiting_seconds_total", "Total time in seconds that processes have waited due to IO congestion"),
			full: desc("io_stalled_seconds_total", "Total time in seconds no process could make progress due to IO congestion")},
		{name: "memory",
			some: desc("memory_waiting_seconds_total", "Total time in seconds that processes have waited for memory"),
			full: desc("memory_stalled_seconds_total", "Total time in seconds no process could make progress due to memory congestion")},
		{name: "irq", full: desc("irq_stalled_seconds_total", "Total time in seconds no process could make progress due to IRQ congestion")},
	}
	for i := range p.res {
		p.res[i].file = kernfs.NewFile(env.FS.Path("proc", "pressure", p.res[i].name), 256)
		p.res[i].file.NonBlocking = true
	}
	return nil
}

// Sample reads each file; a kernel without PSI (no files, or EOPNOTSUPP
// when booted with psi=0) is not available rather than an error.
func (p *Pressure) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	p.tick++
	found := 0
	var first error
	for i := range p.res {
		r := &p.res[i]
		if r.absent && p.tick%retryAbsentEvery != 0 {
			continue
		}
		data, err := r.file.Read()
		r.absent = errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP)
		if r.absent {
			continue
		}
		if err != nil {
			first = firstErr(first, err)
			continue
		}
		found++
		some, full, err := Parse(data)
		if err != nil {
			first = firstErr(first, fmt.Errorf("%s: %w", r.file.Path(), err))
			continue
		}
		if r.some != nil && some >= 0 {
			b.Add(r.some, float64(some)/1000.0/1000.0)
		}
		if r.full != nil && full >= 0 {
			b.Add(r.full, float64(full)/1000.0/1000.0)
		}
	}
	if found == 0 && first == nil {
		return sampler.ErrNotAvailable
	}
	return first
}

func firstErr(have, err error) error {
	if have != nil {
		return have
	}
	return err
}

var (
	someTag  = []byte("some")
	fullTag  = []byte("full")
	totalKey = []byte("total=")
)

// Parse returns the "total=" microseconds of the "some" and "full" lines
// of a /proc/pressure file, -1 for a line that is absent.
func Parse(data []byte) (some, full int64, err error) {
	some, full = -1, -1
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		kind, rest := kernfs.NextField(line)
		if len(kind) == 0 {
			continue
		}
		var dst *int64
		switch {
		case bytes.Equal(kind, someTag):
			dst = &some
		case bytes.Equal(kind, fullTag):
			dst = &full
		default:
			return -1, -1, fmt.Errorf("line %d: want \"some\" or \"full\", found %q", n, clip(kind))
		}
		var total []byte
		for len(rest) > 0 {
			var f []byte
			if f, rest = kernfs.NextField(rest); bytes.HasPrefix(f, totalKey) {
				total = f[len(totalKey):]
				break
			}
		}
		if total == nil {
			return -1, -1, fmt.Errorf("line %d: no total= field", n)
		}
		v, perr := kernfs.ParseUint(total)
		if perr != nil || v > 1<<62 {
			return -1, -1, fmt.Errorf("line %d: total %q: want an integer", n, clip(total))
		}
		*dst = int64(v)
	}
	return some, full, nil
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
