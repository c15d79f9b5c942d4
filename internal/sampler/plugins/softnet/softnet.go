// Package softnet samples /proc/net/softnet_stat (node_exporter's softnet
// collector): per-CPU packet processing, drops and squeezes.
package softnet

import (
	"context"
	_ "embed"
	"errors"
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
		Name:         "softnet",
		Description:  "per-CPU network softirq counters from /proc/net/softnet_stat",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Softnet{} },
		SampleConfig: sampleConfig,
	})
}

// Stat indexes, in the order of node_exporter's series.
const (
	Processed = iota
	Dropped
	TimeSqueezed
	CPUCollision
	ReceivedRPS
	FlowLimitCount
	BacklogLen
	NumStats
)

// column of each stat in a line; a kernel too old to have one reports 0
// (as node_exporter does).
var column = [NumStats]int{0, 1, 2, 8, 9, 10, 11}

var specs = [NumStats]struct {
	name, help string
	typ        metric.Type
}{
	{"processed_total", "Number of processed packets", metric.Counter},
	{"dropped_total", "Number of dropped packets", metric.Counter},
	{"times_squeezed_total", "Number of times processing packets ran out of quota", metric.Counter},
	{"cpu_collision_total", "Number of collision occur while obtaining device lock while transmitting", metric.Counter},
	{"received_rps_total", "Number of times cpu woken up received_rps", metric.Counter},
	{"flow_limit_count_total", "Number of times flow limit has been reached", metric.Counter},
	{"backlog_len", "Softnet backlog status", metric.Gauge},
}

// MaxCPU bounds the CPU index taken from the file.
const MaxCPU = 1 << 16

// Softnet is the softnet plugin.
type Softnet struct {
	file  *kernfs.File
	descs [][NumStats]*metric.Desc // by CPU index
	seen  []uint64                 // by CPU index: tick that last emitted it
	tick  uint64
}

// Init resolves the file under the root.
func (s *Softnet) Init(env sampler.Env) error {
	s.file = kernfs.NewFile(env.FS.Path("proc", "net", "softnet_stat"), 4096)
	s.file.NonBlocking = true
	return nil
}

// Sample reads one line per online CPU.
func (s *Softnet) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := s.file.Read()
	if err != nil {
		return err
	}
	s.tick++
	var dup error
	err = Parse(data, func(cpu int, v [NumStats]uint64) {
		for len(s.descs) <= cpu {
			s.descs = append(s.descs, [NumStats]*metric.Desc{})
			s.seen = append(s.seen, 0)
		}
		if s.seen[cpu] == s.tick { // a corrupt file naming a CPU twice
			if dup == nil {
				dup = fmt.Errorf("%s: CPU %d listed twice: %w", s.file.Path(), cpu, ErrFormat)
			}
			return
		}
		s.seen[cpu] = s.tick
		d := &s.descs[cpu]
		if d[0] == nil {
			c := strconv.Itoa(cpu)
			for i, sp := range specs {
				d[i] = metric.NewDesc("node_softnet_"+sp.name, sp.help, sp.typ, "cpu", c)
			}
		}
		for i := range d {
			b.Add(d[i], float64(v[i]))
		}
	})
	if err != nil {
		return fmt.Errorf("%s: %w", s.file.Path(), err)
	}
	return dup
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

// Parse calls fn for each line of softnet_stat content with the CPU (the
// 13th column on kernels that have it, else the line number) and its
// stats. It stops at the first bad line; lines before it were reported.
func Parse(data []byte, fn func(cpu int, v [NumStats]uint64)) error {
	var f [16][]byte
	for n := 0; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		k := kernfs.Fields(line, f[:])
		if k == 0 {
			continue
		}
		if k < 9 {
			return fmt.Errorf("line %d: %d columns, want at least 9: %w", n+1, k, ErrFormat)
		}
		var v [NumStats]uint64
		for i, c := range column {
			if c >= k {
				continue
			}
			x, ok := kernfs.ParseHex(f[c], 8)
			if !ok {
				return fmt.Errorf("line %d column %d %q: want hex: %w", n+1, c+1, clip(f[c]), ErrFormat)
			}
			v[i] = x
		}
		cpu := uint64(n)
		if k >= 13 {
			x, ok := kernfs.ParseHex(f[12], 8)
			if !ok || x >= MaxCPU {
				return fmt.Errorf("line %d: CPU index %q: want hex below %d: %w", n+1, clip(f[12]), MaxCPU, ErrFormat)
			}
			cpu = x
		}
		if cpu >= MaxCPU {
			return fmt.Errorf("more than %d lines: %w", MaxCPU, ErrFormat)
		}
		fn(int(cpu), v)
	}
	return nil
}

func clip(b []byte) []byte {
	if len(b) > 20 {
		return b[:20]
	}
	return b
}
