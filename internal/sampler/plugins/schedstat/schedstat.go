// Package schedstat samples per-CPU scheduler statistics from
// /proc/schedstat (node_exporter's schedstat collector).
package schedstat

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "schedstat",
		Description:  "per-CPU run and wait time from /proc/schedstat",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Schedstat{} },
		SampleConfig: sampleConfig,
	})
}

// MaxCPUs bounds the CPUs followed.
const MaxCPUs = 1 << 14

type cpu struct {
	running, waiting, slices *metric.Desc
	seen                     uint64
}

// Schedstat is the schedstat plugin.
type Schedstat struct {
	file   *kernfs.File
	byCPU  map[string]*cpu
	lines  kernfs.LineCache[*cpu]
	tick   uint64
	absent bool
}

// retryAbsentEvery ticks a missing file is looked for again (a kernel
// without CONFIG_SCHEDSTATS has none).
const retryAbsentEvery = 64

// Init resolves /proc/schedstat under the root.
func (s *Schedstat) Init(env sampler.Env) error {
	s.file = kernfs.NewFile(env.FS.Path("proc", "schedstat"), 16384)
	s.file.NonBlocking = true
	s.byCPU = map[string]*cpu{}
	return nil
}

var cpuPrefix = []byte("cpu")

// Sample reads the cpuN lines: of their nine numbers the 7th is the time
// run on the CPU, the 8th the time tasks waited for it (both in
// nanoseconds), the 9th the timeslices run. Other lines (version,
// timestamp, domainN) and cpu lines with fewer numbers are skipped, as
// procfs does.
func (s *Schedstat) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	s.tick++
	if s.absent && s.tick%retryAbsentEvery != 0 {
		return sampler.ErrNotAvailable
	}
	data, err := s.file.Read()
	if s.absent = errors.Is(err, fs.ErrNotExist); s.absent {
		return sampler.ErrNotAvailable
	}
	if err != nil {
		return err
	}
	var first error
	for i := 0; len(data) > 0; i++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		var f [11][]byte
		n := kernfs.Fields(line, f[:])
		num, ok := bytes.CutPrefix(f[0], cpuPrefix)
		if n < 10 || !ok || len(num) == 0 || !digits(num) {
			continue
		}
		var v [3]uint64
		bad := false
		for j := range v {
			if v[j], err = kernfs.ParseUint(f[7+j]); err != nil {
				bad = true
			}
		}
		if bad || !allDigits(f[1:7]) {
			continue
		}
		c, hit := s.lines.Get(i, f[0])
		if !hit {
			if c = s.cpu(num); c == nil {
				if first == nil {
					first = fmt.Errorf("%s: more than %d CPUs", s.file.Path(), MaxCPUs)
				}
				continue
			}
			s.lines.Put(i, f[0], c)
		}
		if c.seen == s.tick {
			continue
		}
		c.seen = s.tick
		b.Add(c.running, float64(v[0])/1e9)
		b.Add(c.waiting, float64(v[1])/1e9)
		b.Add(c.slices, float64(v[2]))
	}
	return first
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func allDigits(fs [][]byte) bool {
	for _, f := range fs {
		if !digits(f) {
			return false
		}
	}
	return true
}

func (s *Schedstat) cpu(num []byte) *cpu {
	if c := s.byCPU[string(num)]; c != nil {
		return c
	}
	if len(s.byCPU) >= MaxCPUs {
		return nil
	}
	n := string(num)
	c := &cpu{
		running: metric.NewDesc("node_schedstat_running_seconds_total", "Number of seconds CPU spent running a process.", metric.Counter, "cpu", n),
		waiting: metric.NewDesc("node_schedstat_waiting_seconds_total", "Number of seconds spent by processing waiting for this CPU.", metric.Counter, "cpu", n),
		slices:  metric.NewDesc("node_schedstat_timeslices_total", "Number of timeslices executed by CPU.", metric.Counter, "cpu", n),
	}
	s.byCPU[n] = c
	return c
}
