// Package lustre samples Lustre's own counters, client side (llite stats
// per file system, osc and mdc stats and rpc_stats per target) and server
// side (obdfilter and mdt stats, and job_stats per job id), under the
// names of the community lustre_exporter (lustre_*{component,target}).
package lustre

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "lustre",
		Description:  "Lustre client and server counters and job_stats: lustre_*{component,target}",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return DefaultConfig() },
		New:          func(c sampler.Configurable) sampler.Plugin { return New(c.(*Config)) },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.lustre] table.
type Config struct {
	sampler.Common
	JobStats     bool   `toml:"job_stats" comment:"read the servers' job_stats (per-job series)"`
	MaxJobSeries int    `toml:"max_job_series" comment:"per-job series sent per tick at most, over all targets; the rest are counted in vigil_lustre_job_series_cut_total"`
	MaxJobs      int    `toml:"max_jobs" comment:"job_stats entries (job and target) followed at most; more are counted in vigil_lustre_jobs_untracked"`
	JobIDFormat  string `toml:"jobid_format" comment:"the servers' job ids as the clients' jobid_name makes them: %j is the Slurm job id (\"%j\", \"slurm.%j\", \"%j.%u\")"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{JobStats: true, MaxJobSeries: 20000, MaxJobs: 20000, JobIDFormat: "%j"}
}

// Validate checks the plugin-specific options.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxJobSeries < 0 || c.MaxJobSeries > 1<<22 {
		errs = append(errs, fmt.Errorf("max_job_series must be between 0 and 4194304, got %d", c.MaxJobSeries))
	}
	if c.MaxJobs < 1 || c.MaxJobs > 1<<20 {
		errs = append(errs, fmt.Errorf("max_jobs must be between 1 and 1048576, got %d", c.MaxJobs))
	}
	if _, err := ParseJobIDFormat(c.JobIDFormat); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Roots are where Lustre puts its files, in the order a target found in
// two is taken from: /proc (servers, and osc/mdc up to 2.15), /sys
// (single values since 2.10) and debugfs (llite stats since 2.12, osc
// and mdc stats after 2.15).
var Roots = [...][]string{
	{"proc", "fs", "lustre"},
	{"sys", "fs", "lustre"},
	{"sys", "kernel", "debug", "lustre"},
}

// Parsers of the files read.
const (
	pStats = iota // "name N samples [unit] min max sum [sumsq]" lines
	pRPC          // rpc_stats histograms
	pJobs         // job_stats
)

// Kind is one file read in every target directory of a type.
type Kind struct {
	Dir, File string
	Component string // lustre_exporter's component label
	Parser    int
}

// Kinds are the files read.
var Kinds = [...]Kind{
	{"llite", "stats", "client", pStats},
	{"osc", "stats", "client", pStats},
	{"osc", "rpc_stats", "client", pRPC},
	{"mdc", "md_stats", "client", pStats},
	{"mdc", "stats", "client", pStats},
	{"mdc", "rpc_stats", "client", pRPC},
	{"obdfilter", "stats", "ost", pStats},
	{"obdfilter", "job_stats", "ost", pJobs},
	{"mdt", "md_stats", "mdt", pStats},
	{"mdt", "job_stats", "mdt", pJobs},
}

// Bounds on what is followed.
const (
	MaxTargets = 8192    // files read, over all kinds
	MaxSeries  = 1 << 18 // series of the non-job files
	maxLines   = 256     // counters of one stats file or job entry
)

// series are the samples one line gives (up to four for read_bytes and
// write_bytes), and the tick they were last sent, so a counter that two
// files of a target both name is sent once.
type series struct {
	d     [4]*metric.Desc
	n     int
	stamp uint64
}

type source struct {
	kind   *Kind
	ki     int
	root   int // index in Roots of the directory it was found in
	target string
	file   *kernfs.File
	seen   uint64 // rescan that last found it
	lines  kernfs.LineCache[*series]
	byName map[string]*series // lines that moved
	rows   map[rowKey]*series // rpc_stats
	// job_stats: the entries by Lustre job id, their order in the last
	// read (entries rarely move), and the op index of each line of an
	// entry (the same for every job of a target).
	jobs    map[string]*job
	order   []*job
	next    []*job
	ops     kernfs.LineCache[int]
	opIndex map[string]int
	opNames []string
}

type job struct {
	raw    string // as job_stats has it
	id     string // the jobid label: the Slurm job id when the format matches
	seen   uint64
	series []*series // by op index
}

// Lustre is the lustre plugin.
type Lustre struct {
	cfg     Config
	format  JobIDFormat
	log     *slog.Logger
	roots   [len(Roots)]string
	dirs    [len(Roots)][len(Kinds)]*kernfs.Dir
	sources []*source
	byKind  [len(Kinds)]map[string]*source // sources by target name
	descs   map[string]*series             // non-job series by name and labels
	scan    uint64
	tick    uint64
	every   sysattr.Rescan
	nJobs   int // entries followed over all targets

	// Accounting, sent as vigil_lustre_*.
	self                                           [nSelf]*metric.Desc
	malformed, unknown, cut, readErrs, added, gone uint64
	untracked, jobsNow                             int
	logs                                           [nLog]onceLog
}

// New returns the plugin for cfg.
func New(cfg *Config) *Lustre { return &Lustre{cfg: *cfg} }

const (
	sSources = iota
	sJobs
	sUntracked
	sCut
	sMalformed
	sUnknown
	sReadErrs
	sAdded
	sGone
	nSelf
)

// Init resolves the roots; a node without Lustre is "not available" on
// its ticks (and looked at again every 64).
func (l *Lustre) Init(env sampler.Env) error {
	if err := l.cfg.Validate(); err != nil {
		return err
	}
	l.format, _ = ParseJobIDFormat(l.cfg.JobIDFormat)
	l.log = env.Logger
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	for i, r := range Roots {
		l.roots[i] = env.FS.Path(r...)
		for k, kd := range Kinds {
			if k == 0 || Kinds[k-1].Dir != kd.Dir {
				l.dirs[i][k] = kernfs.NewDir(filepath.Join(l.roots[i], kd.Dir))
			} else {
				l.dirs[i][k] = l.dirs[i][k-1]
			}
		}
	}
	l.descs = map[string]*series{}
	l.self = [nSelf]*metric.Desc{
		metric.NewDesc("vigil_lustre_sources", "Lustre files read each tick (stats, rpc_stats, job_stats of every target).", metric.Gauge),
		metric.NewDesc("vigil_lustre_jobs", "job_stats entries (job and target) read on the last tick.", metric.Gauge),
		metric.NewDesc("vigil_lustre_jobs_untracked", "job_stats entries on the last tick beyond max_jobs, not sent.", metric.Gauge),
		metric.NewDesc("vigil_lustre_job_series_cut_total", "Per-job series not sent because max_job_series was reached.", metric.Counter),
		metric.NewDesc("vigil_lustre_malformed_lines_total", "Lines of Lustre files that could not be parsed (truncated, bad numbers), skipped.", metric.Counter),
		metric.NewDesc("vigil_lustre_unknown_fields_total", "Fields of Lustre files this version does not know (a newer Lustre), ignored.", metric.Counter),
		metric.NewDesc("vigil_lustre_read_errors_total", "Reads of Lustre files that failed (a target that went away).", metric.Counter),
		metric.NewDesc("vigil_lustre_targets_added_total", "Lustre files that appeared (a target mounted or a client connected).", metric.Counter),
		metric.NewDesc("vigil_lustre_targets_removed_total", "Lustre files that went away.", metric.Counter),
	}
	return nil
}

// Log kinds: each is logged when it starts, once, until a tick is free of it.
const (
	logMalformed = iota
	logUnknown
	logCut
	logUntracked
	logRead
	nLog
)

var logMsgs = [nLog]string{
	"lustre: malformed lines skipped",
	"lustre: unknown fields ignored (a newer Lustre?)",
	"lustre: per-job series cut at max_job_series",
	"lustre: job_stats entries beyond max_jobs not followed",
	"lustre: reading a Lustre file failed",
}

// onceLog logs a kind of trouble once when it starts; a tick without it
// re-arms it. detail is made only then, so a steady state costs nothing.
type onceLog struct {
	hit    bool
	detail error
	oc     logging.OnChange
}

func (l *Lustre) note(kind int, detail func() error) {
	o := &l.logs[kind]
	if !o.hit {
		o.hit = true
		if o.detail == nil {
			o.detail = detail()
		}
	}
}

func (l *Lustre) flushLogs() {
	for i := range l.logs {
		o := &l.logs[i]
		if o.hit {
			o.oc.Warn(l.log, logMsgs[i], o.detail)
		} else {
			o.oc.Warn(l.log, logMsgs[i], nil)
			o.detail = nil
		}
		o.hit = false
	}
}

// rescan lists each root's directories and opens the files that appeared.
func (l *Lustre) rescan() error {
	l.scan++
	present := false
	for r := range Roots {
		if _, err := os.Stat(l.roots[r]); err == nil {
			present = true
		}
	}
	if !present {
		return fmt.Errorf("lustre: %w", fs.ErrNotExist)
	}
	for r := range Roots {
		for k := range Kinds {
			kd := &Kinds[k]
			if kd.Parser == pJobs && !l.cfg.JobStats {
				continue
			}
			ents, err := l.dirs[r][k].List()
			if err != nil {
				continue
			}
			for _, e := range ents {
				if e.Type != kernfs.DTDir && e.Type != kernfs.DTLink && e.Type != kernfs.DTUnknown {
					continue
				}
				if s := l.find(k, e.Name); s != nil {
					// Only where it was found: a target gone from /proc
					// may keep a directory of settings in /sys.
					if s.root == r {
						s.seen = l.scan
					}
					continue
				}
				if len(l.sources) >= MaxTargets {
					continue
				}
				p := filepath.Join(l.roots[r], kd.Dir, string(e.Name), kd.File)
				if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
					continue
				}
				s := &source{kind: kd, ki: k, root: r, target: string(e.Name), file: kernfs.NewFile(p, 4096), seen: l.scan}
				s.file.NonBlocking = true
				l.sources = append(l.sources, s)
				if l.byKind[k] == nil {
					l.byKind[k] = map[string]*source{}
				}
				l.byKind[k][s.target] = s
				l.added++
			}
		}
	}
	kept := l.sources[:0]
	for _, s := range l.sources {
		if s.seen == l.scan {
			kept = append(kept, s)
			l.pruneJobs(s)
			continue
		}
		s.file.Close()
		delete(l.byKind[s.ki], s.target)
		l.nJobs -= len(s.jobs)
		l.gone++
	}
	clear(l.sources[len(kept):])
	l.sources = kept
	return nil
}

func (l *Lustre) find(k int, name []byte) *source {
	return l.byKind[k][string(name)]
}

// pruneJobs forgets entries job_stats no longer lists (Lustre drops a job
// job_cleanup_interval, 10 minutes, after its last request).
func (l *Lustre) pruneJobs(s *source) {
	for k, j := range s.jobs {
		if j.seen+sysattr.RescanEvery < l.tick {
			delete(s.jobs, k)
			l.nJobs--
		}
	}
}

// Sample reads every file found. Without Lustre it is "not available"
// and looks again every 64 ticks.
func (l *Lustre) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	l.tick++
	if err := l.every.Tick(l.rescan); errors.Is(err, fs.ErrNotExist) {
		return sampler.ErrNotAvailable
	} else if err != nil {
		return err
	}
	budget := l.cfg.MaxJobSeries
	l.untracked, l.jobsNow = 0, 0
	for _, s := range l.sources {
		data, err := s.file.Read()
		if err != nil {
			l.readErrs++
			l.note(logRead, func() error { return err })
			continue
		}
		switch s.kind.Parser {
		case pStats:
			l.stats(s, data, b)
		case pRPC:
			l.rpcStats(s, data, b)
		case pJobs:
			budget = l.jobStats(s, data, b, budget)
		}
	}
	for i, v := range [nSelf]float64{float64(len(l.sources)), float64(l.jobsNow), float64(l.untracked), float64(l.cut),
		float64(l.malformed), float64(l.unknown), float64(l.readErrs), float64(l.added), float64(l.gone)} {
		b.Add(l.self[i], v)
	}
	l.flushLogs()
	return nil
}

// emit adds the samples of s once per tick; false when s is nil or was
// sent already.
func (l *Lustre) emit(s *series, vals *[4]float64, b *metric.Batch) bool {
	if s == nil || s.stamp == l.tick {
		return false
	}
	s.stamp = l.tick
	for i := 0; i < s.n; i++ {
		b.Add(s.d[i], vals[i])
	}
	return true
}
