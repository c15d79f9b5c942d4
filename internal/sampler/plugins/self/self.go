// Package self reports the sampler's own health: its CPU and memory use and
// the scheduler's per-plugin accounting.
package self

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
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
		Name:         "self",
		Description:  "the sampler's own CPU, memory, ticks and per-plugin errors and durations",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Self{} },
		SampleConfig: sampleConfig,
	})
}

// statmPath is read from the real /proc whatever the sampler's root: the
// root is the node being described, this is the sampler process itself.
const statmPath = "/proc/self/statm"

// Self is the self plugin.
type Self struct {
	stats    *sampler.Stats
	statm    *kernfs.File
	pageSize float64

	cpu, rss, ticks, overruns *metric.Desc
	plugins                   []pluginSeries
}

// pluginSeries are the descriptors of one scheduled plugin.
type pluginSeries struct {
	stats                     *sampler.PluginStats
	errors, duration, samples *metric.Desc
}

// Init prepares the descriptors; env.Stats may be nil (no scheduler).
func (s *Self) Init(env sampler.Env) error {
	s.stats = env.Stats
	s.statm = kernfs.NewFile(statmPath, 256)
	s.statm.NonBlocking = true // our own statm takes no locks that can wait: raw reads (kernfs.File)
	s.pageSize = float64(os.Getpagesize())
	s.cpu = metric.NewDesc("vigil_sampler_cpu_seconds_total", "CPU time (user and system) used by the sampler.", metric.Counter)
	s.rss = metric.NewDesc("vigil_sampler_resident_memory_bytes", "Resident memory of the sampler.", metric.Gauge)
	s.ticks = metric.NewDesc("vigil_sampler_ticks_total", "Ticks run by the sampler's scheduler, over all plugin groups.", metric.Counter)
	s.overruns = metric.NewDesc("vigil_sampler_tick_overruns_total", "Ticks skipped because the previous one ran past them.", metric.Counter)
	return nil
}

// Sample reports the process's resource use and the scheduler's counters.
func (s *Self) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var errs error
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		errs = fmt.Errorf("getrusage: %w", err)
	} else {
		b.Add(s.cpu, micros(int64(ru.Utime.Sec+ru.Stime.Sec)*1e6+int64(ru.Utime.Usec+ru.Stime.Usec)))
	}
	if data, err := s.statm.Read(); err != nil {
		errs = errors.Join(errs, err)
	} else if pages, err := ParseStatm(data); err != nil {
		errs = errors.Join(errs, fmt.Errorf("%s: %w", s.statm.Path(), err))
	} else {
		b.Add(s.rss, float64(pages)*s.pageSize)
	}
	if s.stats == nil {
		return errs
	}
	b.Add(s.ticks, float64(s.stats.Ticks.Load()))
	b.Add(s.overruns, float64(s.stats.Overruns.Load()))
	// The scheduler appends to Stats.Plugins while it is built, after our
	// Init, so the list is read here; it only grows, so the cached series
	// line up with it by position.
	for i, ps := range s.stats.Plugins {
		if i >= len(s.plugins) || s.plugins[i].stats != ps {
			s.plugins = append(s.plugins[:i], newPluginSeries(ps))
		}
		p := &s.plugins[i]
		b.Add(p.errors, float64(ps.Errors.Load()))
		b.Add(p.duration, micros(ps.LastNanos.Load()/1000))
		b.Add(p.samples, float64(ps.Samples.Load()))
	}
	return errs
}

func newPluginSeries(ps *sampler.PluginStats) pluginSeries {
	return pluginSeries{
		stats:    ps,
		errors:   metric.NewDesc("vigil_plugin_errors_total", "Failed samples (errors and recovered panics) of a plugin.", metric.Counter, "plugin", ps.Name),
		duration: metric.NewDesc("vigil_plugin_duration_seconds", "Duration of the plugin's last sample.", metric.Gauge, "plugin", ps.Name),
		samples:  metric.NewDesc("vigil_plugin_samples", "Values appended by the plugin's last sample.", metric.Gauge, "plugin", ps.Name),
	}
}

// micros converts whole microseconds to seconds. Durations are kept to the
// microsecond (rusage's own resolution; nanoseconds of a plugin's run are
// noise), and whole microseconds over 1e6 are what the store keeps as
// integers, at a fraction of the bytes (internal/store/scale.go).
func micros(us int64) float64 { return float64(us) / 1e6 }

// ParseStatm returns the resident set size in pages, the second field of
// /proc/<pid>/statm.
func ParseStatm(data []byte) (uint64, error) {
	line, _ := kernfs.NextLine(data)
	var f [2][]byte
	if n := kernfs.Fields(line, f[:]); n < 2 {
		return 0, fmt.Errorf("want at least 2 fields, found %d", n)
	}
	v, err := kernfs.ParseUint(f[1])
	if err != nil {
		return 0, fmt.Errorf("resident %q: %w", f[1], err)
	}
	return v, nil
}
