// Package vmstat samples /proc/vmstat (node_exporter's vmstat collector,
// but every field by default).
package vmstat

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "vmstat",
		Description:  "virtual memory counters from /proc/vmstat",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return &Config{} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &VMStat{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.vmstat] table.
type Config struct {
	sampler.Common
	// Fields lists name prefixes to export; empty exports every field.
	Fields []string `toml:"fields" comment:"export only fields starting with one of these prefixes; empty = all"`
}

// Validate checks the prefixes: each must be a non-empty run of letters,
// digits and underscores (what vmstat names are made of), listed once.
func (c *Config) Validate() error {
	for i, p := range c.Fields {
		if p == "" || !validName(p) {
			return fmt.Errorf("fields[%d] = %q: want letters, digits and _ only", i, p)
		}
		for _, q := range c.Fields[:i] {
			if q == p {
				return fmt.Errorf("fields: %q listed twice", p)
			}
		}
	}
	return nil
}

// MaxSeries bounds the distinct field names remembered: a kernel has about
// 200, and a file whose names change on every read must not grow the cache
// without limit.
const MaxSeries = 4096

type series struct {
	desc *metric.Desc // nil for fields the config leaves out
	seen uint64       // tick that last emitted it, to catch a field listed twice
}

// VMStat is the vmstat plugin.
type VMStat struct {
	cfg    Config
	file   *kernfs.File
	fields []Field
	byName map[string]*series
	// lines caches the series of each line of the previous read.
	lines kernfs.LineCache[*series]
	tick  uint64
}

// Init validates the config and resolves /proc/vmstat under the root; the
// file is opened on first Sample.
func (v *VMStat) Init(env sampler.Env) error {
	if err := v.cfg.Validate(); err != nil {
		return err
	}
	v.file = kernfs.NewFile(env.FS.Path("proc", "vmstat"), 8192)
	v.file.NonBlocking = true // a system-wide /proc file: raw reads (kernfs.File)
	v.byName = map[string]*series{}
	return nil
}

// Sample emits the selected fields of /proc/vmstat that parsed; the error
// names the file and the first bad line.
func (v *VMStat) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := v.file.Read()
	if err != nil {
		return err
	}
	var perr error
	v.fields, perr = Parse(data, v.fields)
	v.tick++
	for i, f := range v.fields {
		s, cached := v.lines.Get(i, f.Name)
		if !cached {
			var ok bool
			if s, ok = v.byName[string(f.Name)]; !ok {
				if s, err = v.newSeries(f.Name); err != nil {
					perr = firstErr(perr, err)
					continue
				}
			}
			v.lines.Put(i, f.Name, s)
		}
		if s.desc == nil {
			continue
		}
		if s.seen == v.tick {
			perr = firstErr(perr, fmt.Errorf("field %s listed twice: %w", f.Name, ErrFormat))
			continue
		}
		s.seen = v.tick
		b.Add(s.desc, float64(f.Value))
	}
	if perr != nil {
		return fmt.Errorf("%s: %w", v.file.Path(), perr)
	}
	return nil
}

// newSeries decides, once per field name, whether and how it is exported.
func (v *VMStat) newSeries(name []byte) (*series, error) {
	if !validName(string(name)) {
		return nil, fmt.Errorf("field name %q cannot be a metric name: %w", name, ErrFormat)
	}
	if len(v.byName) >= MaxSeries {
		return nil, fmt.Errorf("more than %d distinct fields, ignoring %s", MaxSeries, name)
	}
	s := &series{}
	if v.selected(string(name)) {
		s.desc = metric.NewDesc("node_vmstat_"+string(name),
			"/proc/vmstat information field "+string(name)+".", metric.Untyped)
	}
	v.byName[string(name)] = s
	return s, nil
}

func (v *VMStat) selected(name string) bool {
	if len(v.cfg.Fields) == 0 {
		return true
	}
	for _, p := range v.cfg.Fields {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

func firstErr(have, err error) error {
	if have != nil {
		return have
	}
	return err
}
