// Package textfile exposes metrics that other programs write as *.prom
// files in Prometheus text format into a directory (node_exporter's
// textfile collector): job prolog data, hardware checks, site scripts.
package textfile

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
		Name:        "textfile",
		Description: "metrics from *.prom files in a directory",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &Config{MaxFiles: 1024, MaxFileBytes: 4 << 20, MaxSeries: 20000}
		},
		New:          func(c sampler.Configurable) sampler.Plugin { return &Textfile{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.textfile] table.
type Config struct {
	sampler.Common
	// Directory holds the *.prom files, under the sampler's root; empty:
	// only node_textfile_scrape_error 0 is reported, as node_exporter does.
	Directory string `toml:"directory"`
	// MaxFiles bounds the *.prom files followed.
	MaxFiles int `toml:"max_files"`
	// MaxFileBytes bounds one file's size; a larger file is an error.
	MaxFileBytes int64 `toml:"max_file_bytes"`
	// MaxSeries bounds the series of all files together.
	MaxSeries int `toml:"max_series"`
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	switch {
	case c.MaxFiles < 1:
		return fmt.Errorf("max_files must be at least 1, got %d", c.MaxFiles)
	case c.MaxFileBytes < 1:
		return fmt.Errorf("max_file_bytes must be at least 1, got %d", c.MaxFileBytes)
	case c.MaxSeries < 1:
		return fmt.Errorf("max_series must be at least 1, got %d", c.MaxSeries)
	}
	return nil
}

// fileKey tells whether a file changed since it was read: a file replaced
// by rename (the usual way to write one) has a new inode, one rewritten in
// place a new mtime, ctime or size.
type fileKey struct {
	dev, ino           uint64
	size, mtime, ctime int64
	regular            bool // only regular files are read: a FIFO would block the tick
}

type fileState struct {
	label    string // configured directory + name: the file label
	path     []byte // under the root, NUL-terminated
	key      fileKey
	known    bool // key holds the state last read (or failed to stat)
	ok       bool // read and parsed; its series are exported
	mtime    float64
	families []*Family
	seen     uint64
}

// Textfile is the textfile plugin.
type Textfile struct {
	cfg      Config
	log      *slog.Logger
	dir      *kernfs.Dir
	files    map[string]*fileState
	tick     uint64
	out      []metric.Sample
	descs    map[string]*metric.Desc // by series key, reused across rebuilds
	errDesc  *metric.Desc
	overflow bool // the last rebuild dropped series (limit, duplicates)
	tooMany  bool // more files than max_files
	listErr  bool
	st       syscall.Stat_t
}

// Init checks the configuration; a missing directory is not an error here
// (it is reported every tick by node_textfile_scrape_error, as upstream).
func (t *Textfile) Init(env sampler.Env) error {
	if err := t.cfg.Validate(); err != nil {
		return err
	}
	t.log = env.Logger
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.errDesc = metric.NewDesc("node_textfile_scrape_error", "1 if there was an error opening or reading a file, 0 otherwise", metric.Gauge)
	t.files = map[string]*fileState{}
	t.descs = map[string]*metric.Desc{}
	if t.cfg.Directory != "" {
		t.dir = kernfs.NewDir(env.FS.Path(t.cfg.Directory))
	}
	return nil
}

var promSuffix = []byte(".prom")

// Sample lists the directory and stats every *.prom file; only new or
// changed files are read and parsed again, so a tick with no change
// allocates nothing.
func (t *Textfile) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if t.dir == nil {
		b.Add(t.errDesc, 0)
		return nil
	}
	t.tick++
	errored, changed := false, false
	ents, err := t.dir.List()
	if err != nil {
		if !t.listErr {
			t.log.Warn("textfile: cannot read the directory", "path", t.dir.Path(), "err", err)
		}
		errored, ents = true, nil
	}
	t.listErr = err != nil
	tooMany := false
	for _, e := range ents {
		if !bytes.HasSuffix(e.Name, promSuffix) {
			continue
		}
		f := t.files[string(e.Name)]
		if f == nil {
			if len(t.files) >= t.cfg.MaxFiles {
				tooMany = true
				continue
			}
			f = t.newFile(string(e.Name))
			changed = true
		}
		f.seen = t.tick
		key, err := statKey(f.path, &t.st)
		if err != nil {
			if !f.known || f.ok || f.key != (fileKey{}) {
				t.log.Warn("textfile: cannot stat file", "file", f.label, "err", err)
				f.known, f.ok, f.key, f.families = true, false, fileKey{}, nil
				changed = true
			}
			errored = true
			continue
		}
		if !f.known || key != f.key {
			t.read(f, key)
			changed = true
		}
		if !f.ok {
			errored = true
		}
	}
	if tooMany && !t.tooMany {
		t.log.Warn("textfile: more files than max_files, ignoring the rest", "path", t.dir.Path(), "max_files", t.cfg.MaxFiles)
	}
	t.tooMany = tooMany
	for name, f := range t.files {
		if f.seen != t.tick {
			delete(t.files, name)
			changed = true
		}
	}
	if changed {
		t.rebuild()
	}
	for _, o := range t.out {
		b.Add(o.Desc, o.Value)
	}
	v := 0.0
	if errored || tooMany || t.overflow {
		v = 1
	}
	b.Add(t.errDesc, v)
	return nil
}

func (t *Textfile) newFile(name string) *fileState {
	path := filepath.Join(t.dir.Path(), name)
	f := &fileState{
		label: filepath.Join(t.cfg.Directory, name),
		path:  append([]byte(path), 0),
	}
	t.files[name] = f
	return f
}

// read reads and parses a new or changed file.
func (t *Textfile) read(f *fileState, key fileKey) {
	f.known, f.key, f.ok, f.families = true, key, false, nil
	if !key.regular {
		t.log.Warn("textfile: skipping file", "file", f.label, "err", "not a regular file")
		return
	}
	fams, mtime, err := t.load(string(f.path[:len(f.path)-1]))
	if err != nil {
		t.log.Warn("textfile: skipping file", "file", f.label, "err", err)
		return
	}
	f.ok, f.families, f.mtime = true, fams, mtime
}

func (t *Textfile) load(path string) ([]*Family, float64, error) {
	// O_NONBLOCK: a file swapped for a FIFO since the stat must not block
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("not a regular file")
	}
	max := t.cfg.MaxFileBytes
	data, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, 0, fmt.Errorf("read: %w", err)
	}
	if int64(len(data)) > max {
		return nil, 0, fmt.Errorf("larger than max_file_bytes (%d)", max)
	}
	fams, err := Parse(data, Limits{MaxSamples: t.cfg.MaxSeries, MaxLabels: 64})
	if err != nil {
		return nil, 0, err
	}
	// The mtime is taken after the parse, as upstream does, so a file
	// that failed never looks fresh.
	fi, err := fh.Stat()
	if err != nil {
		return nil, 0, err
	}
	return fams, float64(fi.ModTime().UnixNano() / 1e9), nil
}

// rebuild computes the exported samples from the files' families, reusing
// the descriptors of series that were there before.
func (t *Textfile) rebuild() {
	names := make([]string, 0, len(t.files))
	for n, f := range t.files {
		if f.ok {
			names = append(names, n)
		}
	}
	slices.Sort(names) // node_exporter reads a directory in name order
	help := map[string]string{}
	from := map[string][]string{}
	for _, n := range names {
		f := t.files[n]
		for _, fam := range f.families {
			if _, ok := help[fam.Name]; !ok && fam.HasHelp {
				help[fam.Name] = fam.Help
			}
			from[fam.Name] = append(from[fam.Name], f.label)
		}
	}
	old := t.descs
	t.descs = make(map[string]*metric.Desc, len(old))
	t.out = t.out[:0]
	t.overflow = false
	var key []byte
	emit := func(name, h string, typ metric.Type, labels []metric.Label, extra metric.Label, v float64) {
		if len(t.out) >= t.cfg.MaxSeries {
			t.overflow = true
			return
		}
		key = append(key[:0], name...)
		key = append(key, 0)
		for _, l := range labels {
			if l.Value != "" { // an empty value is no label, in Prometheus
				key = append(append(append(append(key, l.Name...), 0), l.Value...), 0)
			}
		}
		if extra.Name != "" {
			key = append(append(append(append(key, extra.Name...), 0), extra.Value...), 0)
		}
		if _, dup := t.descs[string(key)]; dup {
			t.overflow = true // node_exporter's registry refuses a repeated series
			return
		}
		d := old[string(key)]
		if d == nil || d.Help != h || d.Type != typ {
			d = &metric.Desc{Name: name, Help: h, Type: typ}
			for _, l := range labels {
				if l.Value != "" {
					d.Labels = append(d.Labels, l)
				}
			}
			if extra.Name != "" {
				d.Labels = append(d.Labels, extra)
			}
		}
		t.descs[string(key)] = d
		t.out = append(t.out, metric.Sample{Desc: d, Value: v})
	}
	for _, n := range names {
		f := t.files[n]
		for _, fam := range f.families {
			h, ok := help[fam.Name]
			if !ok {
				h = "Metric read from " + strings.Join(from[fam.Name], ", ")
			}
			for _, m := range fam.Metrics {
				switch fam.Kind {
				case KindCounter:
					emit(fam.Name, h, metric.Counter, m.Labels, metric.Label{}, m.Value)
				case KindGauge:
					emit(fam.Name, h, metric.Gauge, m.Labels, metric.Label{}, m.Value)
				case KindUntyped:
					emit(fam.Name, h, metric.Untyped, m.Labels, metric.Label{}, m.Value)
				case KindSummary, KindHistogram:
					emitComposite(fam, m, h, emit)
				}
			}
		}
	}
	for _, n := range names {
		f := t.files[n]
		emit("node_textfile_mtime_seconds", "Unixtime mtime of textfiles successfully read.", metric.Gauge,
			[]metric.Label{{Name: "file", Value: f.label}}, metric.Label{}, f.mtime)
	}
	if t.overflow {
		t.log.Warn("textfile: series dropped (repeated, or over max_series)", "max_series", t.cfg.MaxSeries)
	}
}

// emitComposite writes a summary's quantiles or a histogram's buckets
// (sorted, one per bound, the last value winning, +Inf added from the
// count when absent) and their _sum and _count, as client_golang's constant
// summaries and histograms do.
func emitComposite(fam *Family, m *Metric, h string,
	emit func(name, h string, typ metric.Type, labels []metric.Label, extra metric.Label, v float64)) {
	pts := slices.Clone(m.Points)
	slices.SortStableFunc(pts, func(a, b Point) int {
		switch {
		case a.Bound < b.Bound:
			return -1
		case a.Bound > b.Bound:
			return 1
		}
		return 0
	})
	name, lname := fam.Name, "quantile"
	if fam.Kind == KindHistogram {
		name, lname = fam.Name+"_bucket", "le"
	}
	inf := false
	for i, p := range pts {
		if i+1 < len(pts) && pts[i+1].Bound == p.Bound {
			continue // a repeated bound: the later one wins
		}
		inf = inf || math.IsInf(p.Bound, 1)
		emit(name, h, metric.Untyped, m.Labels, metric.Label{Name: lname, Value: formatBound(p.Bound)}, p.Value)
	}
	if fam.Kind == KindHistogram && !inf {
		emit(name, h, metric.Untyped, m.Labels, metric.Label{Name: "le", Value: "+Inf"}, m.Count)
	}
	emit(fam.Name+"_sum", h, metric.Untyped, m.Labels, metric.Label{}, m.Sum)
	emit(fam.Name+"_count", h, metric.Untyped, m.Labels, metric.Label{}, m.Count)
}

// formatBound formats an le or quantile value as the text format writes it.
func formatBound(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
