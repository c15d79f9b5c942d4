// Package btrfs samples Btrfs file systems from /sys/fs/btrfs
// (node_exporter's btrfs collector, without its ioctl device statistics).
package btrfs

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infodesc"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sysattr"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "btrfs",
		Description:  "Btrfs allocation and devices from /sys/fs/btrfs",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &Btrfs{} },
		SampleConfig: sampleConfig,
	})
}

// BlockGroupTypes are the allocation directories read.
var BlockGroupTypes = [...]string{"data", "metadata", "system"}

// Bounds.
const (
	MaxFilesystems = 256
	MaxValues      = 4096 // files read per file system
)

// value is a sysfs number read as procfs does: missing or unparsable is 0.
// Without a file, scale is the constant reported (0 for a file missing at
// start, the ratio for allocation_ratio).
type value struct {
	file  *kernfs.File
	desc  *metric.Desc
	scale float64
}

type filesystem struct {
	name   string
	sig    []byte        // devices and layouts the files were opened for
	dirs   []*kernfs.Dir // devices/ and allocation/{data,metadata,system}/, listed for sig
	label  *kernfs.File
	info   *infodesc.Desc
	vals   [2][]byte
	values []value
	seen   uint64
}

// Btrfs is the btrfs plugin.
type Btrfs struct {
	dir   *kernfs.Dir
	fss   []*filesystem
	scan  uint64 // listings made
	every sysattr.Rescan
}

// Init resolves /sys/fs/btrfs under the root.
func (b *Btrfs) Init(env sampler.Env) error {
	b.dir = kernfs.NewDir(env.FS.Path("sys", "fs", "btrfs"))
	return nil
}

func (b *Btrfs) rescan() error {
	ents, err := b.dir.List()
	if err != nil {
		return err
	}
	b.scan++
	for _, e := range ents {
		if bytes.IndexByte(e.Name, '-') < 0 { // "features" and such are not file systems
			continue
		}
		var f *filesystem
		for _, k := range b.fss {
			if k.name == string(e.Name) {
				f = k
			}
		}
		if f == nil {
			if len(b.fss) >= MaxFilesystems {
				continue
			}
			f = &filesystem{name: string(e.Name)}
			b.fss = append(b.fss, f)
		}
		f.seen = b.scan
		// devices and layouts change (btrfs device add, balance): reopen
		// only then, so the series keep their descriptors
		if b.changed(f) || f.values == nil {
			f.close()
			if err := b.open(f); err != nil {
				f.close()
			}
		}
	}
	kept := b.fss[:0]
	for _, f := range b.fss {
		if f.seen == b.scan {
			kept = append(kept, f)
		} else {
			f.close()
			for _, d := range f.dirs {
				d.Close()
			}
		}
	}
	clear(b.fss[len(kept):])
	b.fss = kept
	return nil
}

// changed lists the devices and layouts (without allocating once the
// buffers have grown) and reports whether they differ from the last look.
func (b *Btrfs) changed(f *filesystem) bool {
	if f.dirs == nil {
		root := filepath.Join(b.dir.Path(), f.name)
		f.dirs = []*kernfs.Dir{kernfs.NewDir(filepath.Join(root, "devices"))}
		for _, t := range BlockGroupTypes {
			f.dirs = append(f.dirs, kernfs.NewDir(filepath.Join(root, "allocation", t)))
		}
	}
	n := 0
	same := true
	put := func(c byte) {
		if n < len(f.sig) && f.sig[n] == c {
			n++
			return
		}
		if same {
			f.sig, same = f.sig[:n], false
		}
		f.sig = append(f.sig, c)
		n++
	}
	for i, d := range f.dirs {
		ents, _ := d.List()
		put('/')
		for _, e := range ents {
			if i > 0 && e.Type != kernfs.DTDir && e.Type != kernfs.DTUnknown {
				continue // allocation files, not layouts
			}
			for _, c := range e.Name {
				put(c)
			}
			put(',')
		}
	}
	if n != len(f.sig) {
		f.sig, same = f.sig[:n], false
	}
	return !same
}

func subdirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// ratio is a layout's data allocation ratio, as procfs computes it.
func ratio(layout string, devs int) float64 {
	switch layout {
	case "single", "raid0":
		return 1
	case "dup", "raid1", "raid10":
		return 2
	case "raid5":
		return float64(devs) / (float64(devs) - 1)
	case "raid6":
		return float64(devs) / (float64(devs) - 2)
	}
	return 0
}

// open lists a file system's devices and allocation layouts and opens
// their files; the uuid label is metadata_uuid when present.
func (b *Btrfs) open(f *filesystem) error {
	root := filepath.Join(b.dir.Path(), f.name)
	uuid := f.name
	if m, err := os.ReadFile(filepath.Join(root, "metadata_uuid")); err == nil && len(kernfs.TrimSpace(m)) > 0 {
		uuid = string(infodesc.Clip(kernfs.TrimSpace(m)))
	}
	f.label = kernfs.NewFile(filepath.Join(root, "label"), 256)
	f.label.NonBlocking = true
	f.info = infodesc.New("node_btrfs_info", "Filesystem information", metric.Gauge, "uuid", "label")
	f.vals[0] = []byte(uuid)
	// procfs fails a file system without these directories
	devs, err := os.ReadDir(filepath.Join(root, "devices"))
	if err != nil {
		return err
	}
	if _, err := os.ReadDir(filepath.Join(root, "features")); err != nil {
		return err
	}
	add := func(path, name, help string, scale float64, kv ...string) {
		if len(f.values) >= MaxValues {
			return
		}
		d := metric.NewDesc("node_btrfs_"+name, help, metric.Gauge, append([]string{"uuid", uuid}, kv...)...)
		if _, err := os.Stat(path); err != nil {
			f.values = append(f.values, value{nil, d, 0}) // reads as 0, as in procfs
			return
		}
		k := kernfs.NewFile(path, 32)
		k.NonBlocking = true
		f.values = append(f.values, value{k, d, scale})
	}
	add(filepath.Join(root, "allocation", "global_rsv_size"), "global_rsv_size_bytes", "Size of global reserve.", 1)
	for _, t := range BlockGroupTypes {
		dir := filepath.Join(root, "allocation", t)
		layouts, err := subdirs(dir)
		if err != nil {
			return err
		}
		add(filepath.Join(dir, "bytes_reserved"), "reserved_bytes", "Amount of space reserved for a data type", 1, "block_group_type", t)
		for _, l := range layouts {
			add(filepath.Join(dir, l, "used_bytes"), "used_bytes", "Amount of used space by a layout/data type", 1, "block_group_type", t, "mode", l)
			add(filepath.Join(dir, l, "total_bytes"), "size_bytes", "Amount of space allocated for a layout/data type", 1, "block_group_type", t, "mode", l)
			// a constant per layout and device count: scale holds it, no file
			f.values = append(f.values, value{nil, metric.NewDesc("node_btrfs_allocation_ratio", "Data allocation ratio for a layout/data type",
				metric.Gauge, "uuid", uuid, "block_group_type", t, "mode", l), ratio(l, len(devs))})
		}
	}
	for _, d := range devs {
		add(filepath.Join(root, "devices", d.Name(), "size"), "device_size_bytes", "Size of a device that is part of the filesystem.", 512, "device", d.Name())
	}
	return nil
}

func (f *filesystem) close() {
	if f.label != nil {
		f.label.Close()
	}
	for _, v := range f.values {
		if v.file != nil {
			v.file.Close()
		}
	}
	f.values = nil
}

// Sample reads every file system's numbers; without Btrfs it is "not
// available".
func (b *Btrfs) Sample(_ context.Context, _ time.Time, batch *metric.Batch) error {
	if err := b.every.Tick(b.rescan); errors.Is(err, fs.ErrNotExist) {
		return sampler.ErrNotAvailable
	} else if err != nil {
		return err
	}
	var first error
	for _, f := range b.fss {
		if f.values == nil {
			continue
		}
		label, err := f.label.Read()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			if first == nil {
				first = err
			}
			continue
		}
		f.vals[1] = kernfs.TrimSpace(label)
		batch.Add(f.info.Get(f.vals[:]), 1)
		for _, v := range f.values {
			if v.file == nil {
				batch.Add(v.desc, v.scale)
				continue
			}
			data, err := v.file.Read()
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				if first == nil {
					first = fmt.Errorf("%s: %w", v.file.Path(), err)
				}
				continue
			}
			n, _ := kernfs.ParseUint(kernfs.TrimSpace(data)) // procfs reads junk as 0
			batch.Add(v.desc, float64(n)*v.scale)
		}
	}
	return first
}
