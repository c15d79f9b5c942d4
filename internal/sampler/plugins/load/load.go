// Package load samples /proc/loadavg (node_exporter's loadavg collector).
package load

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
		Name:         "load",
		Description:  "load averages from /proc/loadavg",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Load{} },
		SampleConfig: sampleConfig,
	})
}

// Load is the load plugin.
type Load struct {
	file  *kernfs.File
	descs [3]*metric.Desc
}

// Init opens nothing yet; it resolves the file under the root.
func (l *Load) Init(env sampler.Env) error {
	l.file = kernfs.NewFile(env.FS.Path("proc", "loadavg"), 256)
	l.file.NonBlocking = true // a system-wide /proc file: raw reads (kernfs.File)
	l.descs = [3]*metric.Desc{
		metric.NewDesc("node_load1", "1m load average.", metric.Gauge),
		metric.NewDesc("node_load5", "5m load average.", metric.Gauge),
		metric.NewDesc("node_load15", "15m load average.", metric.Gauge),
	}
	return nil
}

// Sample reads the three load averages.
func (l *Load) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	data, err := l.file.Read()
	if err != nil {
		return err
	}
	var v [3]float64
	if err := Parse(data, &v); err != nil {
		return fmt.Errorf("%s: %w", l.file.Path(), err)
	}
	for i, d := range l.descs {
		b.Add(d, v[i])
	}
	return nil
}

// Parse reads the first three fields of /proc/loadavg content.
func Parse(data []byte, v *[3]float64) error {
	line, _ := kernfs.NextLine(data)
	var f [3][]byte
	if n := kernfs.Fields(line, f[:]); n < 3 {
		return fmt.Errorf("want 3 load averages, found %d fields", n)
	}
	for i := range f {
		x, err := kernfs.ParseFixed(f[i])
		if err != nil {
			return fmt.Errorf("load average %d %q: %w", i+1, f[i], err)
		}
		v[i] = x
	}
	return nil
}
