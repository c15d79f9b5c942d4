// Package xfs samples per-filesystem XFS statistics from
// /sys/fs/xfs/<device>/stats/stats (node_exporter's xfs collector).
package xfs

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "xfs",
		Description:  "per-filesystem XFS statistics from /sys/fs/xfs",
		Default:      true,
		New:          func(sampler.Configurable) sampler.Plugin { return &XFS{} },
		SampleConfig: sampleConfig,
	})
}

// Counters lists the exported values: the stats line, the position of the
// value on it, the metric name after node_xfs_, and its help. The kernel
// writes "rw" as write calls, then read calls.
var Counters = [...]struct {
	Line       string
	Index      int
	Name, Help string
}{
	{"extent_alloc", 0, "extent_allocation_extents_allocated_total", "Number of extents allocated for a filesystem."},
	{"extent_alloc", 1, "extent_allocation_blocks_allocated_total", "Number of blocks allocated for a filesystem."},
	{"extent_alloc", 2, "extent_allocation_extents_freed_total", "Number of extents freed for a filesystem."},
	{"extent_alloc", 3, "extent_allocation_blocks_freed_total", "Number of blocks freed for a filesystem."},
	{"abt", 0, "allocation_btree_lookups_total", "Number of allocation B-tree lookups for a filesystem."},
	{"abt", 1, "allocation_btree_compares_total", "Number of allocation B-tree compares for a filesystem."},
	{"abt", 2, "allocation_btree_records_inserted_total", "Number of allocation B-tree records inserted for a filesystem."},
	{"abt", 3, "allocation_btree_records_deleted_total", "Number of allocation B-tree records deleted for a filesystem."},
	{"blk_map", 0, "block_mapping_reads_total", "Number of block map for read operations for a filesystem."},
	{"blk_map", 1, "block_mapping_writes_total", "Number of block map for write operations for a filesystem."},
	{"blk_map", 2, "block_mapping_unmaps_total", "Number of block unmaps (deletes) for a filesystem."},
	{"blk_map", 3, "block_mapping_extent_list_insertions_total", "Number of extent list insertions for a filesystem."},
	{"blk_map", 4, "block_mapping_extent_list_deletions_total", "Number of extent list deletions for a filesystem."},
	{"blk_map", 5, "block_mapping_extent_list_lookups_total", "Number of extent list lookups for a filesystem."},
	{"blk_map", 6, "block_mapping_extent_list_compares_total", "Number of extent list compares for a filesystem."},
	{"bmbt", 0, "block_map_btree_lookups_total", "Number of block map B-tree lookups for a filesystem."},
	{"bmbt", 1, "block_map_btree_compares_total", "Number of block map B-tree compares for a filesystem."},
	{"bmbt", 2, "block_map_btree_records_inserted_total", "Number of block map B-tree records inserted for a filesystem."},
	{"bmbt", 3, "block_map_btree_records_deleted_total", "Number of block map B-tree records deleted for a filesystem."},
	{"dir", 0, "directory_operation_lookup_total", "Number of file name directory lookups which miss the operating systems directory name lookup cache."},
	{"dir", 1, "directory_operation_create_total", "Number of times a new directory entry was created for a filesystem."},
	{"dir", 2, "directory_operation_remove_total", "Number of times an existing directory entry was created for a filesystem."},
	{"dir", 3, "directory_operation_getdents_total", "Number of times the directory getdents operation was performed for a filesystem."},
	{"ig", 0, "inode_operation_attempts_total", "Number of times the OS looked for an XFS inode in the inode cache."},
	{"ig", 1, "inode_operation_found_total", "Number of times the OS looked for and found an XFS inode in the inode cache."},
	{"ig", 2, "inode_operation_recycled_total", "Number of times the OS found an XFS inode in the cache, but could not use it as it was being recycled."},
	{"ig", 3, "inode_operation_missed_total", "Number of times the OS looked for an XFS inode in the cache, but did not find it."},
	{"ig", 4, "inode_operation_duplicates_total", "Number of times the OS tried to add a missing XFS inode to the inode cache, but found it had already been added by another process."},
	{"ig", 5, "inode_operation_reclaims_total", "Number of times the OS reclaimed an XFS inode from the inode cache to free memory for another purpose."},
	{"ig", 6, "inode_operation_attribute_changes_total", "Number of times the OS explicitly changed the attributes of an XFS inode."},
	{"rw", 1, "read_calls_total", "Number of read(2) system calls made to files in a filesystem."},
	{"rw", 0, "write_calls_total", "Number of write(2) system calls made to files in a filesystem."},
	{"vnodes", 0, "vnode_active_total", "Number of vnodes not on free lists for a filesystem."},
	{"vnodes", 1, "vnode_allocate_total", "Number of times vn_alloc called for a filesystem."},
	{"vnodes", 2, "vnode_get_total", "Number of times vn_get called for a filesystem."},
	{"vnodes", 3, "vnode_hold_total", "Number of times vn_hold called for a filesystem."},
	{"vnodes", 4, "vnode_release_total", "Number of times vn_rele called for a filesystem."},
	{"vnodes", 5, "vnode_reclaim_total", "Number of times vn_reclaim called for a filesystem."},
	{"vnodes", 6, "vnode_remove_total", "Number of times vn_remove called for a filesystem."},
}

// lineLen is the number of values procfs requires on each line read
// (vnodes has an eighth, "free", on newer kernels).
var lineLen = map[string][2]int{
	"extent_alloc": {4, 4}, "abt": {4, 4}, "blk_map": {7, 7}, "bmbt": {4, 4},
	"dir": {4, 4}, "ig": {7, 7}, "rw": {2, 2}, "vnodes": {7, 8},
}

// MaxDevices bounds the file systems followed.
const MaxDevices = 1024

// rescanEvery ticks the device list is read again (file systems are
// mounted and unmounted).
const rescanEvery = 64

type device struct {
	file  *kernfs.File
	descs [len(Counters)]*metric.Desc
	seen  uint64
}

// XFS is the xfs plugin.
type XFS struct {
	dir     *kernfs.Dir
	devs    map[string]*device
	notDev  map[string]bool // entries without stats/stats (the global "stats")
	order   []*device
	vals    [len(Counters)]uint64
	tick    uint64
	scanned uint64
}

// Init resolves /sys/fs/xfs under the root.
func (x *XFS) Init(env sampler.Env) error {
	x.dir = kernfs.NewDir(env.FS.Path("sys", "fs", "xfs"))
	x.devs = map[string]*device{}
	x.notDev = map[string]bool{}
	return nil
}

func (x *XFS) rescan() error {
	ents, err := x.dir.List()
	if err != nil {
		return err
	}
	x.scanned++
	for _, e := range ents {
		if d := x.devs[string(e.Name)]; d != nil {
			d.seen = x.scanned
			continue
		}
		if x.notDev[string(e.Name)] || len(x.devs) >= MaxDevices {
			continue
		}
		name := string(e.Name)
		p := filepath.Join(x.dir.Path(), name, "stats", "stats")
		if _, err := os.Stat(p); err != nil {
			if len(x.notDev) < MaxDevices {
				x.notDev[name] = true
			}
			continue
		}
		d := &device{file: kernfs.NewFile(p, 2048), seen: x.scanned}
		d.file.NonBlocking = true // summed from per-CPU counters in memory
		for i, c := range Counters {
			d.descs[i] = metric.NewDesc("node_xfs_"+c.Name, c.Help, metric.Counter, "device", name)
		}
		x.devs[name] = d
	}
	x.order = x.order[:0]
	for name, d := range x.devs {
		if d.seen != x.scanned {
			d.file.Close()
			delete(x.devs, name)
			continue
		}
		x.order = append(x.order, d)
	}
	return nil
}

// Sample reads every file system's stats; without XFS it is "not
// available".
func (x *XFS) Sample(_ context.Context, _ time.Time, b *metric.Batch) error {
	if x.tick++; x.tick%rescanEvery == 1 {
		if err := x.rescan(); errors.Is(err, fs.ErrNotExist) {
			return sampler.ErrNotAvailable
		} else if err != nil {
			return err
		}
	}
	if len(x.order) == 0 {
		return sampler.ErrNotAvailable
	}
	var first error
	for _, d := range x.order {
		data, err := d.file.Read()
		if err == nil {
			err = Parse(data, &x.vals)
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", d.file.Path(), err)
			}
			continue
		}
		for i, v := range x.vals {
			b.Add(d.descs[i], float64(v))
		}
	}
	return first
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

// Parse fills vals (in Counters order) from a stats file; a line read must
// have procfs's number of values, each fitting 32 bits; a missing line
// reads as zeros.
func Parse(data []byte, vals *[len(Counters)]uint64) error {
	*vals = [len(Counters)]uint64{}
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		key, rest := kernfs.NextField(line)
		want, ok := lineLen[string(key)]
		if !ok {
			continue
		}
		var v [8]uint64
		n := 0
		for {
			var f []byte
			f, rest = kernfs.NextField(rest)
			if len(f) == 0 {
				break
			}
			if n == len(v) {
				return fmt.Errorf("%s: too many values: %w", key, ErrFormat)
			}
			u, err := kernfs.ParseUint(f)
			if err != nil || u > 1<<32-1 {
				return fmt.Errorf("%s: value %q: %w", key, f, ErrFormat)
			}
			v[n] = u
			n++
		}
		if n < want[0] || n > want[1] {
			return fmt.Errorf("%s: %d values, want %d: %w", key, n, want[0], ErrFormat)
		}
		for i, c := range Counters {
			if c.Line == string(key) {
				vals[i] = v[c.Index]
			}
		}
	}
	return nil
}
