// Package zfs samples the ZFS kstats under /proc/spl/kstat/zfs
// (node_exporter's zfs collector): ARC, DMU, ZIL and the other module
// statistics, and per pool its I/O counters, datasets and state.
package zfs

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
		Name:         "zfs",
		Description:  "ZFS kstats from /proc/spl/kstat/zfs",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &ZFS{} },
		SampleConfig: sampleConfig,
	})
}

// Subsystems maps the metric prefix (after node_) to the kstat file.
var Subsystems = [...][2]string{
	{"zfs_abd", "abdstats"}, {"zfs_arc", "arcstats"}, {"zfs_dbuf", "dbuf_stats"}, {"zfs_dmu_tx", "dmu_tx"},
	{"zfs_dnode", "dnodestats"}, {"zfs_fm", "fm"}, {"zfs_vdev_cache", "vdev_cache_stats"},
	{"zfs_vdev_mirror", "vdev_mirror_stats"}, {"zfs_xuio", "xuio_stats"}, {"zfs_zfetch", "zfetchstats"},
	{"zfs_zil", "zil"},
}

// PoolStates are node_zfs_zpool_state's state label values.
var PoolStates = [...]string{"online", "degraded", "faulted", "offline", "removed", "unavail"}

// Bounds on what is followed.
const (
	MaxPools    = 256
	MaxDatasets = 4096 // objset files over all pools
	MaxSeries   = 1 << 16
)

// kstat is one "name type data" file whose series are cached per line.
type kstat struct {
	file  *kernfs.File
	lines kernfs.LineCache[*metric.Desc]
}

type pool struct {
	name    string
	dir     *kernfs.Dir // for its objset-* files
	io      *kernfs.File
	ioDescs kernfs.LineCache[*metric.Desc] // by header column
	state   *kernfs.File
	states  [len(PoolStates)]*metric.Desc
	objsets map[string]*objset
	seen    uint64
}

type objset struct {
	file    *kernfs.File
	dataset string
	lines   kernfs.LineCache[*metric.Desc]
	seen    uint64
}

// ZFS is the zfs plugin.
type ZFS struct {
	base  string
	dir   *kernfs.Dir
	subs  [len(Subsystems)]*kstat
	pools []*pool
	descs map[string]*metric.Desc // by name + labels, bounded by MaxSeries
	nsets int
	scan  uint64 // listings made
	every sysattr.Rescan
}

// Init resolves /proc/spl/kstat/zfs under the root.
func (z *ZFS) Init(env sampler.Env) error {
	z.base = env.FS.Path("proc", "spl", "kstat", "zfs")
	z.dir = kernfs.NewDir(z.base)
	z.descs = map[string]*metric.Desc{}
	return nil
}

// desc returns the series for name and labels, made on first use.
func (z *ZFS) desc(name, help string, typ metric.Type, labels ...string) *metric.Desc {
	key := name + "\x00" + strings.Join(labels, "\x00")
	if d := z.descs[key]; d != nil {
		return d
	}
	if len(z.descs) >= MaxSeries {
		return nil
	}
	d := metric.NewDesc(name, help, typ, labels...)
	z.descs[key] = d
	return d
}

// rescan opens module kstats that appeared and lists pools and datasets.
func (z *ZFS) rescan() error {
	ents, err := z.dir.List()
	if err != nil {
		return err
	}
	z.scan++
	for _, e := range ents { // module kstats that appeared (by name: no stat per rescan)
		for i, s := range Subsystems {
			if z.subs[i] == nil && string(e.Name) == s[1] {
				z.subs[i] = &kstat{file: kernfs.NewFile(filepath.Join(z.base, s[1]), 8192)}
				z.subs[i].file.NonBlocking = true
			}
		}
	}
	for _, e := range ents {
		if e.Type != kernfs.DTDir && e.Type != kernfs.DTUnknown {
			continue
		}
		var pl *pool
		for _, p := range z.pools {
			if p.name == string(e.Name) {
				pl = p
			}
		}
		if pl == nil {
			name := string(e.Name)
			dir := filepath.Join(z.base, name)
			if _, err := os.Stat(filepath.Join(dir, "state")); err != nil {
				if _, err := os.Stat(filepath.Join(dir, "io")); err != nil {
					continue // not a pool directory
				}
			}
			if len(z.pools) >= MaxPools {
				continue
			}
			pl = &pool{name: name, dir: kernfs.NewDir(dir), objsets: map[string]*objset{}}
			if _, err := os.Stat(filepath.Join(dir, "io")); err == nil { // gone in OpenZFS 2.x
				pl.io = kernfs.NewFile(filepath.Join(dir, "io"), 1024)
				pl.io.NonBlocking = true
			}
			if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
				pl.state = kernfs.NewFile(filepath.Join(dir, "state"), 64)
				pl.state.NonBlocking = true
			}
			for i, s := range PoolStates {
				pl.states[i] = metric.NewDesc("node_zfs_zpool_state", "kstat.zfs.misc.state", metric.Gauge, "zpool", name, "state", s)
			}
			z.pools = append(z.pools, pl)
		}
		pl.seen = z.scan
		z.scanObjsets(pl)
	}
	kept := z.pools[:0]
	for _, p := range z.pools {
		if p.seen == z.scan {
			kept = append(kept, p)
		} else {
			z.dropPool(p)
		}
	}
	clear(z.pools[len(kept):])
	z.pools = kept
	return nil
}

var objsetPrefix = []byte("objset-")

func (z *ZFS) scanObjsets(p *pool) {
	ents, err := p.dir.List()
	if err != nil {
		return
	}
	for _, e := range ents {
		if !bytes.HasPrefix(e.Name, objsetPrefix) {
			continue
		}
		o := p.objsets[string(e.Name)]
		if o == nil {
			if z.nsets >= MaxDatasets {
				continue
			}
			o = &objset{file: kernfs.NewFile(filepath.Join(z.base, p.name, string(e.Name)), 2048)}
			o.file.NonBlocking = true
			p.objsets[string(e.Name)] = o
			z.nsets++
		}
		o.seen = z.scan
	}
	for n, o := range p.objsets {
		if o.seen != z.scan {
			o.file.Close()
			delete(p.objsets, n)
			z.nsets--
		}
	}
}

func (z *ZFS) dropPool(p *pool) {
	p.dir.Close()
	if p.io != nil {
		p.io.Close()
	}
	if p.state != nil {
		p.state.Close()
	}
	for _, o := range p.objsets {
		o.file.Close()
	}
	z.nsets -= len(p.objsets)
}

// Sample reads the module kstats and every pool's files. Without the
// module it is "not available" and looks again every 64 ticks.
func (z *ZFS) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if err := z.every.Tick(z.rescan); errors.Is(err, fs.ErrNotExist) {
		return sampler.ErrNotAvailable
	} else if err != nil {
		return err
	}
	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for i, k := range z.subs {
		if k == nil {
			continue
		}
		data, err := k.file.Read()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = z.kstat(data, k, i, b)
		}
		note(err)
	}
	for _, p := range z.pools {
		if p.io != nil {
			data, err := p.io.Read()
			if err == nil {
				err = z.poolIO(data, p, b)
			}
			if err != nil {
				note(fmt.Errorf("%s: %w", p.io.Path(), err))
			}
		}
		for _, o := range p.objsets {
			data, err := o.file.Read()
			if errors.Is(err, fs.ErrNotExist) {
				continue // dataset unmounted since the last scan
			}
			if err == nil {
				err = z.objset(data, p, o, b)
			}
			if err != nil {
				note(fmt.Errorf("%s: %w", o.file.Path(), err))
			}
		}
		if p.state != nil {
			data, err := p.state.Read()
			if err != nil {
				note(err)
				continue
			}
			st, _ := kernfs.NextLine(data)
			for i, s := range PoolStates {
				v := 0.0
				if bytes.EqualFold(st, []byte(s)) {
					v = 1
				}
				b.Add(p.states[i], v)
			}
		}
	}
	return first
}

// ErrFormat is wrapped by parse errors.
var ErrFormat = errors.New("unexpected kstat format")

var header = [3]string{"name", "type", "data"}

// body returns what follows the "name type data" line, ok false when the
// file has none.
func body(data []byte) ([]byte, bool) {
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		var f [4][]byte
		if kernfs.Fields(line, f[:]) == 3 && string(f[0]) == header[0] && string(f[1]) == header[1] && string(f[2]) == header[2] {
			return data, true
		}
	}
	return nil, false
}

// value parses the data column of a numeric kstat line: type 4 (uint64)
// or 3 (int64); ok is false for other types.
func value(typ, data []byte) (float64, bool, error) {
	switch string(typ) {
	case "4":
		v, err := kernfs.ParseUint(data)
		return float64(v), true, err
	case "3":
		v, err := kernfs.ParseInt(data)
		return float64(v), true, err
	}
	return 0, false, nil
}

// metricName makes a kstat name a metric name part as upstream does ("-"
// becomes "_"), or "" when it has other characters no metric name allows.
func metricName(name []byte) string {
	out := []byte(nil)
	for _, c := range name {
		switch {
		case c == '-':
			c = '_'
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		default:
			return ""
		}
		out = append(out, c)
	}
	return string(out)
}

func (z *ZFS) kstat(data []byte, k *kstat, sub int, b *metric.Batch) error {
	rest, ok := body(data)
	if !ok {
		return fmt.Errorf("%s: no \"name type data\" line: %w", k.file.Path(), ErrFormat)
	}
	for i := 0; len(rest) > 0; i++ {
		var line []byte
		line, rest = kernfs.NextLine(rest)
		var f [3][]byte
		if kernfs.Fields(line, f[:]) < 3 {
			continue
		}
		v, numeric, err := value(f[1], f[2])
		if err != nil {
			return fmt.Errorf("%s: %s: could not parse expected integer value: %w", k.file.Path(), f[0], ErrFormat)
		}
		if !numeric {
			continue
		}
		d, hit := k.lines.Get(i, f[0])
		if !hit {
			if n := metricName(f[0]); n != "" {
				d = z.desc("node_"+Subsystems[sub][0]+"_"+n, "kstat.zfs.misc."+Subsystems[sub][1]+"."+string(f[0]), metric.Untyped)
			}
			k.lines.Put(i, f[0], d)
		}
		if d != nil {
			b.Add(d, v)
		}
	}
	return nil
}

var nread = []byte("nread")

// poolIO reads a pool's io kstat: a header line of at least 12 column
// names starting with nread, then lines of as many values.
func (z *ZFS) poolIO(data []byte, p *pool, b *metric.Batch) error {
	var cols [32][]byte
	n := 0
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		if n == 0 {
			if k := kernfs.Fields(line, cols[:]); k >= 12 && bytes.Equal(cols[0], nread) {
				n = k
			}
			continue
		}
		var vals [32][]byte
		if k := kernfs.Fields(line, vals[:]); k == 0 {
			continue
		} else if k < n {
			return fmt.Errorf("%d values for %d columns: %w", k, n, ErrFormat)
		}
		for i := 0; i < n; i++ {
			v, err := kernfs.ParseUint(vals[i])
			if err != nil {
				return fmt.Errorf("%s: could not parse expected integer value: %w", cols[i], ErrFormat)
			}
			d, hit := p.ioDescs.Get(i, cols[i])
			if !hit {
				if m := metricName(cols[i]); m != "" {
					d = z.desc("node_zfs_zpool_"+m, "kstat.zfs.misc.io."+string(cols[i]), metric.Untyped, "zpool", p.name)
				}
				p.ioDescs.Put(i, cols[i], d)
			}
			if d != nil {
				b.Add(d, float64(v))
			}
		}
	}
	return nil
}

var datasetName = []byte("dataset_name")

// objset reads one dataset's kstat: its dataset_name line names the
// dataset of the uint64 lines.
func (z *ZFS) objset(data []byte, p *pool, o *objset, b *metric.Batch) error {
	rest, ok := body(data)
	if !ok {
		return fmt.Errorf("no \"name type data\" line: %w", ErrFormat)
	}
	for i := 0; len(rest) > 0; i++ {
		var line []byte
		line, rest = kernfs.NextLine(rest)
		var f [3][]byte
		if kernfs.Fields(line, f[:]) < 3 {
			continue
		}
		if bytes.Equal(f[0], datasetName) {
			if o.dataset != string(f[2]) {
				o.dataset = string(f[2])
				o.lines = kernfs.LineCache[*metric.Desc]{}
			}
			continue
		}
		if string(f[1]) != "4" {
			continue
		}
		v, err := kernfs.ParseUint(f[2])
		if err != nil {
			return fmt.Errorf("%s: could not parse expected integer value: %w", f[0], ErrFormat)
		}
		d, hit := o.lines.Get(i, f[0])
		if !hit {
			if m := metricName(f[0]); m != "" {
				d = z.desc("node_zfs_zpool_dataset_"+m, "kstat.zfs.misc.objset."+string(f[0]), metric.Untyped,
					"zpool", p.name, "dataset", o.dataset)
			}
			o.lines.Put(i, f[0], d)
		}
		if d != nil {
			b.Add(d, float64(v))
		}
	}
	return nil
}
