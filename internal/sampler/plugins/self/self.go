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
		NewConfig:    func() sampler.Configurable { return &Config{ExporterNames: true} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &Self{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.self] table.
type Config struct {
	sampler.Common
	// ExporterNames adds the series every Prometheus exporter has about
	// itself (process_*, node_scrape_collector_*), which node_exporter
	// dashboards chart, beside Vigil's own names.
	ExporterNames bool `toml:"exporter_names"`
}

// statmPath is read from the real /proc whatever the sampler's root: the
// root is the node being described, this is the sampler process itself.
const (
	statmPath = "/proc/self/statm"
	fdPath    = "/proc/self/fd"
)

// Self is the self plugin.
type Self struct {
	cfg      Config
	stats    *sampler.Stats
	statm    *kernfs.File
	fds      *kernfs.Dir
	pageSize float64
	started  float64

	cpu, rss, ticks, overruns *metric.Desc
	plugins                   []pluginSeries
	// node_exporter's names for the same (cfg.ExporterNames).
	pCPU, pRSS, pVirt, pFDs, pMaxFDs, pStart *metric.Desc

	// fdsBySize: the kernel reports the count as the size of
	// /proc/self/fd (Linux 6.2), so no tick lists it; decided on the first.
	fdsBySize, fdsChecked bool
}

// pluginSeries are the descriptors of one scheduled plugin.
type pluginSeries struct {
	stats                     *sampler.PluginStats
	errors, duration, samples *metric.Desc
	scrapeDuration, success   *metric.Desc // nil without ExporterNames
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
	if s.cfg.ExporterNames {
		// The help texts of client_golang's process collector.
		s.fds = kernfs.NewDir(fdPath)
		s.fds.NonBlocking = true // our own descriptor table: raw reads (kernfs.Dir)
		s.started = float64(time.Now().Unix())
		s.pCPU = metric.NewDesc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", metric.Counter)
		s.pRSS = metric.NewDesc("process_resident_memory_bytes", "Resident memory size in bytes.", metric.Gauge)
		s.pVirt = metric.NewDesc("process_virtual_memory_bytes", "Virtual memory size in bytes.", metric.Gauge)
		s.pFDs = metric.NewDesc("process_open_fds", "Number of open file descriptors.", metric.Gauge)
		s.pMaxFDs = metric.NewDesc("process_max_fds", "Maximum number of open file descriptors.", metric.Gauge)
		s.pStart = metric.NewDesc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", metric.Gauge)
	}
	return nil
}

// Sample reports the process's resource use and the scheduler's counters.
func (s *Self) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	var errs error
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		errs = fmt.Errorf("getrusage: %w", err)
	} else {
		cpu := micros(int64(ru.Utime.Sec+ru.Stime.Sec)*1e6 + int64(ru.Utime.Usec+ru.Stime.Usec))
		b.Add(s.cpu, cpu)
		if s.pCPU != nil {
			b.Add(s.pCPU, cpu)
		}
	}
	if data, err := s.statm.Read(); err != nil {
		errs = errors.Join(errs, err)
	} else if size, pages, err := parseStatm(data); err != nil {
		errs = errors.Join(errs, fmt.Errorf("%s: %w", s.statm.Path(), err))
	} else {
		b.Add(s.rss, float64(pages)*s.pageSize)
		if s.pRSS != nil {
			b.Add(s.pRSS, float64(pages)*s.pageSize)
			b.Add(s.pVirt, float64(size)*s.pageSize)
		}
	}
	if s.pFDs != nil {
		errs = errors.Join(errs, s.sampleFDs(b))
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
			s.plugins = append(s.plugins[:i], s.newPluginSeries(ps))
		}
		p := &s.plugins[i]
		b.Add(p.errors, float64(ps.Errors.Load()))
		b.Add(p.duration, micros(ps.LastNanos.Load()/1000))
		b.Add(p.samples, float64(ps.Samples.Load()))
		if p.scrapeDuration != nil {
			b.Add(p.scrapeDuration, micros(ps.LastNanos.Load()/1000))
			ok := 1.0
			if ps.LastFail.Load() {
				ok = 0
			}
			b.Add(p.success, ok)
		}
	}
	return errs
}

// sampleFDs reports the open descriptors (entries of /proc/self/fd, less
// the one reading it), their limit and the start time.
func (s *Self) sampleFDs(b *metric.Batch) error {
	var errs error
	if !s.fdsChecked {
		size, err := s.fds.Size()
		s.fdsBySize, s.fdsChecked = err == nil && size > 0, err == nil
	}
	if s.fdsBySize {
		// Listing it makes procfs look up every descriptor: 9 % of the
		// streaming sampler's CPU at 10 Hz (perf), this is one fstat.
		if size, err := s.fds.Size(); err != nil {
			errs = err
		} else {
			b.Add(s.pFDs, float64(max(size-1, 0)))
		}
	} else if ents, err := s.fds.List(); err != nil {
		errs = err
	} else {
		b.Add(s.pFDs, float64(max(len(ents)-1, 0)))
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		errs = errors.Join(errs, fmt.Errorf("getrlimit: %w", err))
	} else {
		b.Add(s.pMaxFDs, float64(rl.Cur))
	}
	b.Add(s.pStart, s.started)
	return errs
}

func (s *Self) newPluginSeries(ps *sampler.PluginStats) pluginSeries {
	p := pluginSeries{
		stats:    ps,
		errors:   metric.NewDesc("vigil_plugin_errors_total", "Failed samples (errors and recovered panics) of a plugin.", metric.Counter, "plugin", ps.Name),
		duration: metric.NewDesc("vigil_plugin_duration_seconds", "Duration of the plugin's last sample.", metric.Gauge, "plugin", ps.Name),
		samples:  metric.NewDesc("vigil_plugin_samples", "Values appended by the plugin's last sample.", metric.Gauge, "plugin", ps.Name),
	}
	if s.cfg.ExporterNames {
		c := ps.Name
		if n, ok := collectorNames[c]; ok {
			c = n
		}
		p.scrapeDuration = metric.NewDesc("node_scrape_collector_duration_seconds", "node_exporter: Duration of a collector scrape.", metric.Gauge, "collector", c)
		p.success = metric.NewDesc("node_scrape_collector_success", "node_exporter: Whether a collector succeeded.", metric.Gauge, "collector", c)
	}
	return p
}

// collectorNames are node_exporter's names of the collectors that read the
// same files as a plugin of another name.
var collectorNames = map[string]string{"memory": "meminfo", "load": "loadavg"}

// micros converts whole microseconds to seconds. Durations are kept to the
// microsecond (rusage's own resolution; nanoseconds of a plugin's run are
// noise), and whole microseconds over 1e6 are what the store keeps as
// integers, at a fraction of the bytes (internal/store/scale.go).
func micros(us int64) float64 { return float64(us) / 1e6 }

// ParseStatm returns the resident set size in pages, the second field of
// /proc/<pid>/statm.
func ParseStatm(data []byte) (uint64, error) {
	_, rss, err := parseStatm(data)
	return rss, err
}

// parseStatm returns the first two fields of /proc/<pid>/statm: the
// virtual and the resident size in pages.
func parseStatm(data []byte) (size, rss uint64, err error) {
	line, _ := kernfs.NextLine(data)
	var f [2][]byte
	if n := kernfs.Fields(line, f[:]); n < 2 {
		return 0, 0, fmt.Errorf("want at least 2 fields, found %d", n)
	}
	if size, err = kernfs.ParseUint(f[0]); err != nil {
		return 0, 0, fmt.Errorf("size %q: %w", f[0], err)
	}
	if rss, err = kernfs.ParseUint(f[1]); err != nil {
		return 0, 0, fmt.Errorf("resident %q: %w", f[1], err)
	}
	return size, rss, nil
}
