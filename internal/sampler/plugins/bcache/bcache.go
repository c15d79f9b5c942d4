// Package bcache samples bcache cache sets, their backing and cache
// devices from /sys/fs/bcache (node_exporter's bcache collector).
package bcache

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "bcache",
		Description:  "bcache cache sets and devices from /sys/fs/bcache",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return &Config{} },
		New:          func(c sampler.Configurable) sampler.Plugin { return &Bcache{cfg: *c.(*Config)} },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.bcache] table.
type Config struct {
	sampler.Common
	// PriorityStats reads each cache device's priority_stats, which walks
	// every bucket of the cache (node_exporter's --collector.bcache.priorityStats).
	PriorityStats bool `toml:"priority_stats"`
}

// value is one file read as bcache writes numbers ("12", "1.5M").
type value struct {
	file  *kernfs.File
	desc  *metric.Desc
	scale float64 // 0: 1
}

type metricDef struct{ file, name, help string }

// Set-wide files (under the set, then internal/), as node_exporter names them.
var setGauges = [...]metricDef{
	{"average_key_size", "average_key_size_sectors", "Average data per key in the btree (sectors)."},
	{"btree_cache_size", "btree_cache_size_bytes", "Amount of memory currently used by the btree cache."},
	{"cache_available_percent", "cache_available_percent", "Percentage of cache device without dirty data, usable for writeback (may contain clean cached data)."},
	{"congested", "congested", "Congestion."},
	{"root_usage_percent", "root_usage_percent", "Percentage of the root btree node in use (tree depth increases if too high)."},
	{"tree_depth", "tree_depth", "Depth of the btree."},
	{"internal/active_journal_entries", "active_journal_entries", "Number of journal entries that are newer than the index."},
	{"internal/btree_nodes", "btree_nodes", "Total nodes in the btree."},
	{"internal/btree_read_average_duration_us", "btree_read_average_duration_seconds", "Average btree read duration."},
}

var periodCounters = [...]metricDef{
	{"bypassed", "bypassed_bytes_total", "Amount of IO (both reads and writes) that has bypassed the cache."},
	{"cache_hits", "cache_hits_total", "Hits counted per individual IO as bcache sees them."},
	{"cache_misses", "cache_misses_total", "Misses counted per individual IO as bcache sees them."},
	{"cache_bypass_hits", "cache_bypass_hits_total", "Hits for IO intended to skip the cache."},
	{"cache_bypass_misses", "cache_bypass_misses_total", "Misses for IO intended to skip the cache."},
	{"cache_miss_collisions", "cache_miss_collisions_total", "Instances where data insertion from cache miss raced with write (data already present)."},
	{"cache_readaheads", "cache_readaheads_total", "Count of times readahead occurred."},
}

// writeback_rate_debug lines exported: key, metric, help, signed.
var wrdLines = [...]struct {
	key, name, help string
	signed          bool
}{
	{"target:", "dirty_target_bytes", "Current dirty data target threshold for this backing device in bytes.", false},
	{"rate:", "writeback_rate", "Current writeback rate for this backing device in bytes.", false},
	{"proportional:", "writeback_rate_proportional_term", "Current result of proportional controller, part of writeback rate", true},
	{"integral:", "writeback_rate_integral_term", "Current result of integral controller, part of writeback rate", true},
	{"change:", "writeback_change", "Last writeback rate change step for this backing device.", true},
}

type set struct {
	name   string
	values []value
	wrd    []*bdevDebug
	prio   []*cachePrio
	seen   uint64
}

type bdevDebug struct {
	file  *kernfs.File
	descs [len(wrdLines)]*metric.Desc
}

type cachePrio struct {
	file           *kernfs.File
	unused, metaPc *metric.Desc
}

// Bcache is the bcache plugin.
type Bcache struct {
	cfg   Config
	dir   *kernfs.Dir
	sets  []*set
	scan  uint64 // listings made
	every sysattr.Rescan
}

// MaxSets bounds the cache sets followed (each with its devices).
const MaxSets = 64

// Init resolves /sys/fs/bcache under the root.
func (b *Bcache) Init(env sampler.Env) error {
	b.dir = kernfs.NewDir(env.FS.Path("sys", "fs", "bcache"))
	return nil
}

func (b *Bcache) rescan() error {
	ents, err := b.dir.List()
	if err != nil {
		return err
	}
	b.scan++
	for _, e := range ents {
		if bytes.IndexByte(e.Name, '-') < 0 { // cache sets are UUIDs; "register" and such are not
			continue
		}
		var s *set
		for _, k := range b.sets {
			if k.name == string(e.Name) {
				s = k
			}
		}
		if s == nil {
			if len(b.sets) >= MaxSets {
				continue
			}
			s = b.newSet(string(e.Name))
			b.sets = append(b.sets, s)
		}
		s.seen = b.scan
	}
	kept := b.sets[:0]
	for _, s := range b.sets {
		if s.seen == b.scan {
			kept = append(kept, s)
		} else {
			s.close()
		}
	}
	clear(b.sets[len(kept):])
	b.sets = kept
	return nil
}

// newSet opens a cache set's files and those of its bdevN and cacheN
// devices (attached when the set is registered).
func (b *Bcache) newSet(uuid string) *set {
	root := filepath.Join(b.dir.Path(), uuid)
	s := &set{name: uuid}
	add := func(path, name, help string, typ metric.Type, scale float64, kv ...string) {
		f := kernfs.NewFile(path, 64)
		f.NonBlocking = true
		s.values = append(s.values, value{f, metric.NewDesc("node_bcache_"+name, help, typ, append([]string{"uuid", uuid}, kv...)...), scale})
	}
	for _, m := range setGauges {
		scale := 0.0
		if m.name == "btree_read_average_duration_seconds" {
			scale = 1e-9 // as upstream, which reads the microseconds as nanoseconds
		}
		add(filepath.Join(root, m.file), m.name, m.help, metric.Gauge, scale)
	}
	add(filepath.Join(root, "internal", "cache_read_races"), "cache_read_races_total",
		"Counts instances where while data was being read from the cache, the bucket was reused and invalidated - i.e. where the pointer was stale after the read completed.", metric.Counter, 0)
	bdevs, _ := filepath.Glob(filepath.Join(root, "bdev[0-9]*"))
	for _, d := range bdevs {
		name := filepath.Base(d)
		add(filepath.Join(d, "dirty_data"), "dirty_data_bytes", "Amount of dirty data for this backing device in the cache.", metric.Gauge, 0, "backing_device", name)
		w := &bdevDebug{file: kernfs.NewFile(filepath.Join(d, "writeback_rate_debug"), 512)}
		w.file.NonBlocking = true
		for i, l := range wrdLines {
			w.descs[i] = metric.NewDesc("node_bcache_"+l.name, l.help, metric.Gauge, "uuid", uuid, "backing_device", name)
		}
		s.wrd = append(s.wrd, w)
		for _, m := range periodCounters {
			add(filepath.Join(d, "stats_total", m.file), m.name, m.help, metric.Counter, 0, "backing_device", name)
		}
	}
	caches, _ := filepath.Glob(filepath.Join(root, "cache[0-9]*"))
	for _, d := range caches {
		name := filepath.Base(d)
		add(filepath.Join(d, "io_errors"), "io_errors", "Number of errors that have occurred, decayed by io_error_halflife.", metric.Gauge, 0, "cache_device", name)
		add(filepath.Join(d, "metadata_written"), "metadata_written_bytes_total", "Sum of all non data writes (btree writes and all other metadata).", metric.Counter, 0, "cache_device", name)
		add(filepath.Join(d, "written"), "written_bytes_total", "Sum of all data that has been written to the cache.", metric.Counter, 0, "cache_device", name)
		if b.cfg.PriorityStats {
			p := &cachePrio{file: kernfs.NewFile(filepath.Join(d, "priority_stats"), 512),
				unused: metric.NewDesc("node_bcache_priority_stats_unused_percent", "The percentage of the cache that doesn't contain any data.", metric.Gauge, "uuid", uuid, "cache_device", name),
				metaPc: metric.NewDesc("node_bcache_priority_stats_metadata_percent", "Bcache's metadata overhead.", metric.Gauge, "uuid", uuid, "cache_device", name)}
			s.prio = append(s.prio, p)
		}
	}
	return s
}

func (s *set) close() {
	for _, v := range s.values {
		v.file.Close()
	}
	for _, w := range s.wrd {
		w.file.Close()
	}
	for _, p := range s.prio {
		p.file.Close()
	}
}

// Sample reads every set. A missing file reads as 0, as upstream; a
// malformed one fails its set's tick, naming the file.
func (b *Bcache) Sample(_ context.Context, _ time.Time, batch *metric.Batch) error {
	if err := b.every.Tick(b.rescan); errors.Is(err, fs.ErrNotExist) {
		return sampler.ErrNotAvailable
	} else if err != nil {
		return err
	}
	var first error
	for _, s := range b.sets {
		if err := b.sampleSet(s, batch); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (b *Bcache) sampleSet(s *set, batch *metric.Batch) error {
	start := batch.Len()
	fail := func(f *kernfs.File, err error) error {
		batch.Truncate(start) // the set is all or nothing, as upstream
		return fmt.Errorf("%s: %w", f.Path(), err)
	}
	for _, v := range s.values {
		n, err := readValue(v.file)
		if err != nil {
			return fail(v.file, err)
		}
		x := float64(n)
		if v.scale != 0 {
			x *= v.scale
		}
		batch.Add(v.desc, x)
	}
	for _, w := range s.wrd {
		data, err := w.file.Read()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(w.file, err)
		}
		var vals [len(wrdLines)]float64
		if err := WritebackRateDebug(data, &vals); err != nil {
			return fail(w.file, err)
		}
		for i, d := range w.descs {
			batch.Add(d, vals[i])
		}
	}
	for _, p := range s.prio {
		data, err := p.file.Read()
		if err != nil {
			return fail(p.file, err)
		}
		unused, meta, err := PriorityStats(data)
		if err != nil {
			return fail(p.file, err)
		}
		batch.Add(p.unused, float64(unused))
		batch.Add(p.metaPc, float64(meta))
	}
	return nil
}

// readValue reads a file as procfs does: 0 when missing, else its content
// without the newline, dehumanized.
func readValue(f *kernfs.File) (uint64, error) {
	data, err := f.Read()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return Dehumanize(bytes.TrimSuffix(data, newline))
}

var (
	newline = []byte("\n")
	perSec  = []byte("/sec")
	percent = []byte("%")
)

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected bcache value")

// Dehumanize reads a number as bcache prints it and procfs parses it: a
// plain decimal, or digits with an optional one-digit fraction and a
// binary-prefix suffix (k, M, G, T, P, E, Z, Y), where procfs divides the
// fraction's digits by 10.24 ("1.5k" = (1 + 5/10.24) × 1024), the result
// truncated to an integer. An unknown suffix gives 0, as there.
func Dehumanize(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, fmt.Errorf("zero-length value: %w", ErrFormat)
	}
	last := b[len(b)-1]
	if last <= '9' {
		if v, err := kernfs.ParseUint(b); err == nil {
			return v, nil
		}
		f, err := strconv.ParseFloat(string(b), 64) // rare: a plain fraction
		if err != nil {
			return 0, fmt.Errorf("%q: %w", clip(b), ErrFormat)
		}
		return uint64(f), nil
	}
	mul := 0.0
	if i := strings.IndexByte("kMGTPEZY", last); i >= 0 {
		mul = 1
		for j := 0; j <= i; j++ {
			mul *= 1024
		}
	}
	whole, frac, hasFrac := kernfs.Cut(b[:len(b)-1], '.')
	if hasFrac {
		if j := bytes.IndexByte(frac, '.'); j >= 0 {
			frac = frac[:j] // procfs looks at the first two parts only
		}
	}
	w, err := kernfs.ParseUint(whole)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", clip(b), ErrFormat)
	}
	mant := float64(w)
	if hasFrac {
		f, err := kernfs.ParseUint(frac)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", clip(b), ErrFormat)
		}
		mant += float64(f) / 10.24
	}
	return uint64(mant * mul), nil
}

func signed(b []byte) (float64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	v, err := Dehumanize(b)
	if neg {
		return float64(-int64(v)), err
	}
	return float64(int64(v)), err
}

// WritebackRateDebug fills vals (in wrdLines order) from a backing
// device's writeback_rate_debug: the last field of each line, without
// "/sec".
func WritebackRateDebug(data []byte, vals *[len(wrdLines)]float64) error {
	*vals = [len(wrdLines)]float64{}
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		for i, l := range wrdLines {
			if !hasPrefix(line, l.key) {
				continue
			}
			f := lastField(line)
			f = bytes.TrimSuffix(f, perSec)
			var err error
			if l.signed {
				vals[i], err = signed(f)
			} else {
				var u uint64
				u, err = Dehumanize(f)
				vals[i] = float64(u)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// PriorityStats reads the Unused: and Metadata: percentages.
func PriorityStats(data []byte) (unused, meta uint64, err error) {
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		var dst *uint64
		switch {
		case hasPrefix(line, "Unused:"):
			dst = &unused
		case hasPrefix(line, "Metadata:"):
			dst = &meta
		default:
			continue
		}
		v, err := kernfs.ParseUint(bytes.TrimSuffix(lastField(line), percent))
		if err != nil {
			return 0, 0, fmt.Errorf("%q: %w", clip(line), ErrFormat)
		}
		*dst = v
	}
	return unused, meta, nil
}

func lastField(line []byte) []byte {
	line = kernfs.TrimSpace(line)
	i := len(line)
	for i > 0 && line[i-1] != ' ' && line[i-1] != '\t' {
		i--
	}
	return line[i:]
}

func clip(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}
