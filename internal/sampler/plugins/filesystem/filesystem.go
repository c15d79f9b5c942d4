// Package filesystem reports size and free space of mounted file systems
// (node_exporter's filesystem collector) from the mount table and
// statfs(2), without ever letting a hung mount block a tick.
package filesystem

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

// Defaults of node_exporter 1.5 (upstream, not Debian's patched ones).
const (
	DefaultMountPointsExclude = `^/(dev|proc|run/credentials/.+|sys|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)`
	DefaultFSTypesExclude     = `^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|hugetlbfs|iso9660|mqueue|nsfs|overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|sysfs|tracefs)$`
	// DefaultInlineFSTypes are local and in-memory file systems whose statfs
	// only reads counters kept in memory.
	DefaultInlineFSTypes = `^(devtmpfs|ext[234]|ramfs|tmpfs|xfs)$`
)

func init() {
	sampler.Register(sampler.Registration{
		Name:        "filesystem",
		Description: "file system size and free space from the mount table and statfs(2)",
		Default:     true,
		NewConfig: func() sampler.Configurable {
			return &Config{
				MountPointsExclude: DefaultMountPointsExclude,
				FSTypesExclude:     DefaultFSTypesExclude,
				InlineFSTypes:      DefaultInlineFSTypes,
				MountRefresh:       sampler.Duration(10 * time.Second),
				StatTimeout:        sampler.Duration(500 * time.Millisecond),
				MaxMounts:          1024,
			}
		},
		New:          func(c sampler.Configurable) sampler.Plugin { return New(*c.(*Config)) },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.filesystem] table.
type Config struct {
	sampler.Common
	// MountPointsExclude drops mounts whose (unescaped) mount point matches.
	MountPointsExclude string `toml:"mount_points_exclude"`
	// FSTypesExclude drops mounts whose file system type matches.
	FSTypesExclude string `toml:"fs_types_exclude"`
	// MountRefresh is how often the mount table is re-read at the latest;
	// on Linux a change is also noticed on the next tick.
	MountRefresh sampler.Duration `toml:"mount_refresh"`
	// StatTimeout is how long a tick waits for statfs answers.
	StatTimeout sampler.Duration `toml:"stat_timeout"`
	// MaxMounts bounds the mounts reported (and statfs goroutines kept).
	MaxMounts int `toml:"max_mounts"`
	// InlineFSTypes are file system types whose statfs is called on the
	// tick itself, without a worker and stat_timeout, when the mount and
	// every mount above it match (see inlineSafe); empty: none.
	InlineFSTypes string `toml:"inline_fs_types"`
}

// Validate compiles the expressions and checks the durations.
func (c *Config) Validate() error {
	if _, _, _, err := c.compile(); err != nil {
		return err
	}
	switch {
	case c.MountRefresh <= 0:
		return fmt.Errorf("mount_refresh must be positive")
	case c.StatTimeout <= 0:
		return fmt.Errorf("stat_timeout must be positive")
	case c.Interval > 0 && c.StatTimeout >= c.Interval:
		return fmt.Errorf("stat_timeout %s must be shorter than interval %s", c.StatTimeout.D(), c.Interval.D())
	case c.MaxMounts < 1:
		return fmt.Errorf("max_mounts must be at least 1, got %d", c.MaxMounts)
	}
	return nil
}

func (c *Config) compile() (mp, fs, inline *regexp.Regexp, err error) {
	for _, e := range []struct {
		key, expr string
		re        **regexp.Regexp
	}{
		{"mount_points_exclude", c.MountPointsExclude, &mp},
		{"fs_types_exclude", c.FSTypesExclude, &fs},
		{"inline_fs_types", c.InlineFSTypes, &inline},
	} {
		if e.expr == "" {
			continue
		}
		if *e.re, err = regexp.Compile(e.expr); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w", e.key, err)
		}
	}
	return mp, fs, inline, nil
}

// StatfsFunc is the statfs(2) call; a field of the plugin so tests can
// fake values and hangs.
type StatfsFunc func(path string, st *syscall.Statfs_t) error

// Filesystem is the filesystem plugin.
type Filesystem struct {
	cfg    Config
	statfs StatfsFunc
	log    *slog.Logger
	root   kernfs.FS

	mpExclude, fsExclude *regexp.Regexp
	inline               *regexp.Regexp // nil: every statfs goes through a worker

	file        *kernfs.File // the mountinfo file
	watch       watcher      // notices mount table changes between refreshes
	prev        []byte       // mountinfo content the table was built from
	lastRefresh time.Time
	tableErr    error // problem found in the current table, repeated each tick

	mounts []*mount          // reported, in mount table order
	byKey  map[string]*mount // mounts with a worker, including stuck orphans
	gen    uint64            // mount table generation
	tick   uint64

	done   chan *mount   // workers hand back finished calls
	quit   chan struct{} // closed by Close
	timer  *time.Timer
	closed bool
}

// mount is one reported file system and its statfs worker. Fields below
// req are written by the worker while busy and read by the tick goroutine
// only after receiving the mount from done.
type mount struct {
	path     string // root + mount point, as passed to statfs
	cpath    []byte // path NUL-terminated, built once so a tick allocates nothing
	key      string
	readOnly bool
	inline   bool // statfs cannot block: called on the tick (inlineSafe)
	descs    [numSeries]*metric.Desc
	gen      uint64 // table generation that last listed the mount
	busy     bool   // a statfs call is outstanding
	sent     uint64 // tick that made the outstanding call
	warned   bool   // the current hang was logged
	req      chan struct{}

	st  syscall.Statfs_t
	err error
}

const (
	sizeBytes = iota
	freeBytes
	availBytes
	files
	filesFree
	readOnly
	deviceError
	numSeries
)

var series = [numSeries]struct{ name, help string }{
	{"node_filesystem_size_bytes", "Filesystem size in bytes."},
	{"node_filesystem_free_bytes", "Filesystem free space in bytes."},
	{"node_filesystem_avail_bytes", "Filesystem space available to non-root users in bytes."},
	{"node_filesystem_files", "Filesystem total file nodes."},
	{"node_filesystem_files_free", "Filesystem total free file nodes."},
	{"node_filesystem_readonly", "Filesystem read-only status."},
	{"node_filesystem_device_error", "Whether an error occurred while getting statistics for the given device."},
}

// New returns the plugin with the real statfs(2).
func New(cfg Config) *Filesystem {
	// statfs nil: the worker calls statfs(2) on a pre-built path
	// (syscall.Statfs would allocate the C string on every call).
	return &Filesystem{cfg: cfg}
}

// Init validates the config and finds the mount table: /proc/1/mountinfo
// (the host's mounts when we run in a container sharing the PID
// namespace), else /proc/self/mountinfo (hidepid, or no access to PID 1).
func (f *Filesystem) Init(env sampler.Env) error {
	if err := f.cfg.Validate(); err != nil {
		return err
	}
	f.mpExclude, f.fsExclude, f.inline, _ = f.cfg.compile()
	f.log = env.Logger
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.root = env.FS
	var errs []error
	for _, pid := range []string{"1", "self"} {
		path := env.FS.Path("proc", pid, "mountinfo")
		w, err := newWatcher(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("open %s: %w", path, err))
			continue
		}
		f.file = kernfs.NewFile(path, 16384)
		f.watch = w
		break
	}
	if f.file == nil {
		return fmt.Errorf("%w: no mount table: %w", sampler.ErrNotAvailable, errors.Join(errs...))
	}
	f.byKey = make(map[string]*mount)
	f.done = make(chan *mount, f.cfg.MaxMounts)
	f.quit = make(chan struct{})
	f.timer = time.NewTimer(time.Hour)
	f.timer.Stop()
	return nil
}

// Close stops the statfs workers; a worker stuck in statfs exits when the
// call returns.
func (f *Filesystem) Close() error {
	if f.closed || f.quit == nil {
		return nil
	}
	f.closed = true
	close(f.quit)
	for _, m := range f.byKey {
		close(m.req)
	}
	f.byKey = nil
	f.mounts = nil
	return errors.Join(f.file.Close(), f.watch.close())
}

// Sample refreshes the mount table if due, asks every idle worker for a
// fresh statfs and waits at most stat_timeout for the answers. Mounts
// without an answer are reported with node_filesystem_device_error 1.
func (f *Filesystem) Sample(ctx context.Context, now time.Time, b *metric.Batch) error {
	if f.closed {
		return errors.New("filesystem plugin used after Close")
	}
	f.tick++
	var err error
	if f.gen == 0 || now.Sub(f.lastRefresh) >= f.cfg.MountRefresh.D() || now.Before(f.lastRefresh) || f.watch.changed() {
		f.lastRefresh = now
		err = f.refresh()
	}
	f.collect(ctx)
	for _, m := range f.mounts {
		if m.busy || m.err != nil {
			b.Add(m.descs[deviceError], 1)
			continue
		}
		bsize := float64(m.st.Bsize)
		b.Add(m.descs[sizeBytes], float64(m.st.Blocks)*bsize)
		b.Add(m.descs[freeBytes], float64(m.st.Bfree)*bsize)
		b.Add(m.descs[availBytes], float64(m.st.Bavail)*bsize)
		b.Add(m.descs[files], float64(m.st.Files))
		b.Add(m.descs[filesFree], float64(m.st.Ffree))
		ro := 0.0
		if m.readOnly {
			ro = 1
		}
		b.Add(m.descs[readOnly], ro)
		b.Add(m.descs[deviceError], 0)
	}
	if err == nil {
		err = f.tableErr
	}
	return err
}

// collect starts a statfs on every idle mount and gathers answers until
// all are in, stat_timeout passes or ctx ends.
func (f *Filesystem) collect(ctx context.Context) {
	// Answers to calls of earlier ticks that overran.
	for drained := false; !drained; {
		select {
		case m := <-f.done:
			f.finish(m)
		default:
			drained = true
		}
	}
	pending := 0
	for _, m := range f.mounts {
		if m.busy {
			continue
		}
		if m.inline {
			m.err = statfsNoBlock(m.cpath, &m.st)
			continue
		}
		m.busy, m.sent = true, f.tick
		m.req <- struct{}{} // never blocks: the worker took the previous request
		pending++
	}
	if pending == 0 {
		return
	}
	f.timer.Reset(f.cfg.StatTimeout.D())
	defer f.timer.Stop()
	for pending > 0 {
		select {
		case m := <-f.done:
			if m.sent == f.tick {
				pending--
			}
			f.finish(m)
		case <-f.timer.C:
			f.logStuck()
			return
		case <-ctx.Done():
			return
		}
	}
}

// finish records a returned call; a mount that left the table while its
// call hung is dropped now.
func (f *Filesystem) finish(m *mount) {
	m.busy = false
	if m.warned {
		m.warned = false
		f.log.Info("statfs returned again", "path", m.path, "err", m.err)
	}
	if m.gen != f.gen && f.byKey[m.key] == m {
		delete(f.byKey, m.key)
		close(m.req)
	}
}

func (f *Filesystem) logStuck() {
	for _, m := range f.mounts {
		if m.busy && !m.warned {
			m.warned = true
			f.log.Warn("statfs did not return in time; reporting device_error until it does",
				"path", m.path, "stat_timeout", f.cfg.StatTimeout.D())
		}
	}
}

func (f *Filesystem) worker(m *mount) {
	for range m.req {
		if f.statfs != nil {
			m.err = f.statfs(m.path, &m.st)
		} else {
			m.err = statfsRaw(m.cpath, &m.st)
		}
		select {
		case f.done <- m:
		case <-f.quit:
			return
		}
	}
}

// refresh re-reads the mount table and rebuilds the mount list if the
// content changed.
func (f *Filesystem) refresh() error {
	data, err := f.file.Read()
	if err != nil {
		return fmt.Errorf("mount table: %w", err)
	}
	if f.gen > 0 && bytes.Equal(data, f.prev) {
		return nil
	}
	f.prev = append(f.prev[:0], data...)
	f.gen++
	f.mounts = f.mounts[:0]
	seen := make(map[string]bool)
	table := make(map[uint64]mountRef) // every mount, reported or not
	ids := make(map[*mount]uint64)
	var tableErr error
	perr := ParseMountinfo(data, func(mi Mountinfo) {
		mp := string(Unescape(nil, mi.MountPoint))
		fstype := string(Unescape(nil, mi.FSType))
		table[mi.ID] = mountRef{fstype: fstype, parent: mi.Parent}
		if f.mpExclude != nil && f.mpExclude.MatchString(mp) || f.fsExclude != nil && f.fsExclude.MatchString(fstype) {
			return
		}
		dev := string(Unescape(nil, mi.Source))
		key := dev + "\x00" + fstype + "\x00" + mp
		if seen[key] {
			return // bind mounts of the same device: one set of series
		}
		seen[key] = true
		if len(f.mounts) >= f.cfg.MaxMounts {
			if tableErr == nil {
				tableErr = fmt.Errorf("more than max_mounts=%d mounts in %s; the rest are not reported", f.cfg.MaxMounts, f.file.Path())
			}
			return
		}
		m := f.byKey[key]
		if m == nil {
			p := f.root.Path(mp)
			m = &mount{path: p, cpath: append([]byte(p), 0), key: key, req: make(chan struct{}, 1)}
			for i, s := range series {
				m.descs[i] = metric.NewDesc(s.name, s.help, metric.Gauge, "device", dev, "fstype", fstype, "mountpoint", mp)
			}
			f.byKey[key] = m
			go f.worker(m)
		}
		m.readOnly = mi.ReadOnly
		m.gen = f.gen
		ids[m] = mi.ID
		f.mounts = append(f.mounts, m)
	})
	// Only the real statfs on the real root: a fake one (tests) may hang on
	// purpose, and under another root the path crosses mounts not in table.
	canInline := f.inline != nil && f.statfs == nil && f.root.Root == "/"
	for _, m := range f.mounts {
		m.inline = canInline && inlineSafe(ids[m], table, f.inline)
	}
	for key, m := range f.byKey {
		if m.gen != f.gen && !m.busy { // busy ones go when their call returns
			delete(f.byKey, key)
			close(m.req)
		}
	}
	if perr != nil {
		tableErr = fmt.Errorf("%s: %w", f.file.Path(), perr)
	}
	f.tableErr = tableErr
	return nil
}

// mountRef is what inlineSafe needs of a mount table entry.
type mountRef struct {
	fstype string
	parent uint64
}

// inlineSafe reports whether statfs on mount id can run on the tick: the
// type of the mount and of every mount it sits under (the path walk
// crosses them) match re. A mount point's dentry and all its ancestors are
// pinned in the dentry cache, so on local and in-memory file systems the
// walk and the call only read memory: no device or server to wait for.
func inlineSafe(id uint64, table map[uint64]mountRef, re *regexp.Regexp) bool {
	for range len(table) { // bounded: a corrupt table may hold a cycle
		r, ok := table[id]
		if !ok || !re.MatchString(r.fstype) {
			return false
		}
		if _, ok := table[r.parent]; !ok || r.parent == id {
			return true // the namespace's root mount
		}
		id = r.parent
	}
	return false
}
