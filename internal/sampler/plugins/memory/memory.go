// Package memory samples /proc/meminfo (node_exporter's meminfo collector).
package memory

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "memory",
		Description:  "every field of /proc/meminfo",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Memory{} },
		SampleConfig: sampleConfig,
	})
}

// MaxSeries bounds the distinct fields remembered: a kernel has about 60,
// and a file whose names change on every read must not grow the cache
// without limit.
const MaxSeries = 1024

type series struct {
	desc *metric.Desc
	kB   bool
	seen uint64 // tick that last emitted it, to catch a field listed twice
}

// Memory is the memory plugin.
type Memory struct {
	file   *kernfs.File
	fields []Field
	byName map[string]*series // by field name as written in the file
	// byMetric maps metric names to the same series, so two spellings that
	// rewrite to one name (Active(anon), Active_anon) share one series.
	byMetric map[string]*series
	// lines caches the series of each line of the previous read.
	lines kernfs.LineCache[*series]
	tick  uint64
}

// Init resolves /proc/meminfo under the root; it is opened on first Sample.
func (m *Memory) Init(env sampler.Env) error {
	m.file = kernfs.NewFile(env.FS.Path("proc", "meminfo"), 4096)
	m.file.NonBlocking = true // a system-wide /proc file: raw reads (kernfs.File)
	m.byName = map[string]*series{}
	m.byMetric = map[string]*series{}
	return nil
}

// Sample emits every field of /proc/meminfo that parsed; the error names
// the file and the first bad line.
func (m *Memory) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := m.file.Read()
	if err != nil {
		return err
	}
	var perr error
	m.fields, perr = Parse(data, m.fields)
	m.tick++
	for i, f := range m.fields {
		s, cached := m.lines.Get(i, f.Name)
		if !cached {
			var ok bool
			if s, ok = m.byName[string(f.Name)]; !ok {
				if s, err = m.newSeries(f); err != nil {
					perr = firstErr(perr, err)
					continue
				}
			}
			m.lines.Put(i, f.Name, s)
		}
		switch {
		case s.kB != f.KB:
			perr = firstErr(perr, fmt.Errorf("field %s changed unit: %w", f.Name, ErrFormat))
		case s.seen == m.tick:
			perr = firstErr(perr, fmt.Errorf("field %s listed twice: %w", f.Name, ErrFormat))
		default:
			s.seen = m.tick
			v := float64(f.Value)
			if f.KB {
				v *= 1024
			}
			b.Add(s.desc, v)
		}
	}
	if perr != nil {
		return fmt.Errorf("%s: %w", m.file.Path(), perr)
	}
	return nil
}

// newSeries creates the series of a field seen for the first time.
func (m *Memory) newSeries(f Field) (*series, error) {
	key, ok := MetricKey(f.Name)
	if !ok {
		return nil, fmt.Errorf("field name %q cannot be a metric name: %w", f.Name, ErrFormat)
	}
	if f.KB {
		key += "_bytes"
	}
	s := m.byMetric[key]
	if s == nil {
		if len(m.byMetric) >= MaxSeries {
			return nil, fmt.Errorf("more than %d distinct fields, ignoring %s", MaxSeries, f.Name)
		}
		s = &series{kB: f.KB, desc: metric.NewDesc("node_memory_"+key,
			"Memory information field "+key+".", metric.Gauge)}
		m.byMetric[key] = s
	}
	m.byName[string(f.Name)] = s
	return s, nil
}

// MetricKey rewrites a meminfo field name as node_exporter does:
// "Active(anon)" becomes "Active_anon" (the text from the first "(" to the
// last ")" is replaced by "_" and the text inside). ok is false when the
// result is not a valid metric name part.
func MetricKey(name []byte) (key string, ok bool) {
	lp, rp := -1, -1
	for i, c := range name {
		switch c {
		case '(':
			if lp < 0 {
				lp = i
			}
		case ')':
			rp = i
		}
	}
	if lp >= 0 && rp > lp {
		key = string(name[:lp]) + "_" + string(name[lp+1:rp]) + string(name[rp+1:])
	} else {
		key = string(name)
	}
	if key == "" {
		return "", false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return "", false
		}
	}
	return key, true
}

func firstErr(have, err error) error {
	if have != nil {
		return have
	}
	return err
}
