// Package iofs is `vigil iofs`: a FUSE passthrough file system over a
// source directory that counts, per file and per calling process, the
// appio counters (opens, reads, writes, bytes, times, syncs, stats, size
// histograms, sequential and random accesses), including the page-ins of
// memory-mapped files, which an LD_PRELOAD library cannot see, and reports
// them every interval to the sampler's appio socket as the library does.
package iofs

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/splice"
	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/duration"
)

// DefaultSocket is the sampler's appio socket; SocketEnv overrides it.
const (
	DefaultSocket = "/run/vigil/appio.sock"
	SocketEnv     = "VIGIL_APPIO_SOCKET"
)

// Config are the settings of `vigil iofs`.
type Config struct {
	Source     string
	Mountpoint string
	Socket     string
	Interval   duration.Duration
	AllowOther bool
	MaxFiles   int
	MaxPairs   int
	Metrics    string // address of the self-metrics listener; "" for none
	Proc       string // where /proc is, to map thread ids to processes
}

// DefaultConfig returns the defaults, the socket from the environment.
func DefaultConfig() Config {
	c := Config{Socket: DefaultSocket, Interval: duration.Duration(time.Second),
		MaxFiles: 16384, MaxPairs: 4096, Proc: "/proc"}
	if s := os.Getenv(SocketEnv); s != "" {
		c.Socket = s
	}
	return c
}

// RegisterFlags registers the flags; the mount point is the argument.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Source, "source", c.Source, "directory to pass through (required)")
	fs.StringVar(&c.Socket, "socket", c.Socket, "the sampler's appio socket ($"+SocketEnv+" sets the default)")
	fs.Var(&c.Interval, "interval", "reporting interval, aligned to wall-clock multiples")
	fs.BoolVar(&c.AllowOther, "allow-other", c.AllowOther, "let other users use the mount (needs user_allow_other in /etc/fuse.conf unless root; permissions are checked by the kernel)")
	fs.IntVar(&c.MaxFiles, "max-files", c.MaxFiles, "files tracked at once; beyond, I/O counts as \"other files\"")
	fs.IntVar(&c.MaxPairs, "max-pairs", c.MaxPairs, "(file, process) pairs per interval; beyond, I/O counts as \"other files\"")
	fs.StringVar(&c.Metrics, "metrics", c.Metrics, "serve iofs's own counters (intervals sent and dropped, folds) at http://ADDR/metrics, e.g. 127.0.0.1:9103; empty: off")
}

// Validate checks the settings, naming the flag at fault.
func (c *Config) Validate() error {
	var errs []error
	if c.Source == "" {
		errs = append(errs, errors.New("--source DIR is required"))
	} else if st, err := os.Stat(c.Source); err != nil {
		errs = append(errs, fmt.Errorf("--source: %w", err))
	} else if !st.IsDir() {
		errs = append(errs, fmt.Errorf("--source %s: not a directory", c.Source))
	}
	if c.Mountpoint == "" {
		errs = append(errs, errors.New("MOUNTPOINT argument is required"))
	} else if st, err := os.Stat(c.Mountpoint); errors.Is(err, syscall.ENOTCONN) {
		errs = append(errs, fmt.Errorf("mount point: %w (a FUSE mount whose server died: fusermount3 -u it)", err))
	} else if err != nil {
		errs = append(errs, fmt.Errorf("mount point: %w", err))
	} else if !st.IsDir() {
		errs = append(errs, fmt.Errorf("mount point %s: not a directory", c.Mountpoint))
	}
	if c.Interval.D() < 10*time.Millisecond || c.Interval.D() > time.Hour {
		errs = append(errs, fmt.Errorf("--interval %s: must be between 10ms and 1h", c.Interval))
	}
	if c.Socket == "" {
		errs = append(errs, errors.New("--socket: empty"))
	}
	if c.MaxFiles < 1 || c.MaxFiles > 1<<20 {
		errs = append(errs, fmt.Errorf("--max-files %d: must be between 1 and 1048576", c.MaxFiles))
	}
	if c.MaxPairs < 1 || c.MaxPairs > 1<<20 {
		errs = append(errs, fmt.Errorf("--max-pairs %d: must be between 1 and 1048576", c.MaxPairs))
	}
	return errors.Join(errs...)
}

// FS is a mounted iofs.
type FS struct {
	cfg       Config
	log       *slog.Logger
	mount     string // absolute mount point, the prefix of reported paths
	table     *Table
	pids      *pids
	server    *fuse.Server
	openFlags atomic.Uint32 // FOPEN_DIRECT_IO once the kernel's consent is known
	stats     ReportStats
	rep       *reporter
	folded    atomic.Uint64 // operations folded into "other files" so far
	metrics   *metricsServer
}

// New checks that FUSE is usable and mounts; Run serves and reports.
func New(cfg Config, log *slog.Logger) (*FS, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		return nil, fmt.Errorf("FUSE unavailable: %w (load the fuse module, or give the container /dev/fuse)", err)
	} else {
		f.Close()
	}
	src, err := filepath.Abs(cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("--source: %w", err)
	}
	mnt, err := filepath.Abs(cfg.Mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mount point: %w", err)
	}
	if src == mnt || isUnder(mnt, src) {
		return nil, fmt.Errorf("mount point %s is inside the source %s: the mount would hide or loop into its own files", mnt, src)
	}
	t := &FS{cfg: cfg, log: log, mount: mnt,
		table: NewTable(Limits{MaxFiles: cfg.MaxFiles, MaxPairs: cfg.MaxPairs}),
		pids:  newPids(cfg.Proc, 65536)}
	lr, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return nil, fmt.Errorf("--source %s: %w", src, err)
	}
	ln := lr.(*fs.LoopbackNode)
	root := &node{LoopbackNode: ln, fsys: t}
	ln.RootData.RootNode = root
	sec := time.Second
	opts := &fs.Options{
		MountOptions: fuse.MountOptions{
			AllowOther: cfg.AllowOther,
			// The kernel checks permissions against the files' modes:
			// we serve every user's requests as root.
			Options:     []string{"default_permissions"},
			FsName:      src,
			Name:        "vigil-iofs",
			DirectMount: true, // mount(2) as root; fusermount3 otherwise
			// Under 1 MiB, so that read replies can be spliced.
			MaxWrite: maxRequest,
			// Direct I/O on mmap'able files needs the kernel's consent.
			ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP,
			// Passthrough would hand reads to the kernel uncounted.
			DisabledCapabilities: fuse.CAP_PASSTHROUGH,
			// With a pipe-max-size below 1 MiB every splice would fail
			// (and be logged); reads are then copied.
			DisableSplice: splice.MaxPipeSize() < maxRequest+2*4096,
		},
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NullPermissions: true,
	}
	if cfg.Metrics != "" {
		mln, err := listenMetrics(cfg.Metrics)
		if err != nil {
			return nil, err
		}
		t.metrics = &metricsServer{t: t, ln: mln, descs: metricDescs()}
	}
	server, err := fs.Mount(mnt, root, opts)
	if err != nil {
		if t.metrics != nil {
			t.metrics.ln.Close()
		}
		return nil, fmt.Errorf("mount %s on %s: %w", src, mnt, err)
	}
	t.server = server
	// With direct I/O every read() and write() reaches us as it is (cut
	// at maxRequest) instead of being absorbed by the page cache; mmap still
	// goes through the page cache, so page-ins arrive as reads. A kernel
	// before 6.6 cannot mmap direct I/O files: there the page cache stays
	// and we see its reads (readahead) instead of the calls.
	t.raiseReadahead()
	if server.KernelSettings().Flags64()&fuse.CAP_DIRECT_IO_ALLOW_MMAP != 0 {
		t.openFlags.Store(fuse.FOPEN_DIRECT_IO)
	} else {
		log.Warn("kernel lacks FUSE direct I/O with mmap (Linux 6.6+): counting page-cache reads, not calls")
	}
	return t, nil
}

// readaheadKB is the readahead of the mount, which sizes the reads that
// serve mmap page-ins: the kernel's default of 128 KiB makes a mapped file
// cost eight round trips a MiB.
const readaheadKB = 1024

// maxRequest caps read and write requests two pages under 1 MiB: go-fuse
// splices a read reply through a pipe of data + header + one spare page,
// which must fit the default pipe-max-size (1 MiB).
const maxRequest = 1<<20 - 2*4096

// raiseReadahead sets the mount's readahead (root only: the kernel offers
// no way at mount time beyond 128 KiB; best effort).
func (t *FS) raiseReadahead() {
	var st syscall.Stat_t
	if err := syscall.Stat(t.mount, &st); err != nil {
		return
	}
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	if err := os.WriteFile(p, []byte(strconv.Itoa(readaheadKB)), 0); err != nil {
		t.log.Debug("readahead of the mount left at the kernel's default", "file", p, "err", err)
	}
}

func isUnder(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Mountpoint is the absolute mount point.
func (t *FS) Mountpoint() string { return t.mount }

// Stats are the reporter's counters.
func (t *FS) Stats() *ReportStats { return &t.stats }

// callerPid is the process of the request's calling thread, 0 if it is a
// kernel thread or gone.
func (t *FS) callerPid(ctx context.Context) uint32 {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return 0
	}
	return t.pids.resolve(c.Pid)
}

// Run serves until ctx ends (then unmounts) or the file system is
// unmounted from outside; it reports every interval meanwhile and a last
// partial interval and BYE at the end.
func (t *FS) Run(ctx context.Context) error {
	t.rep = newReporter(t.cfg.Socket, t.cfg.Interval.D(), t.log, &t.stats)
	go t.rep.run()
	if t.metrics != nil {
		mctx, stop := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := t.metrics.serve(mctx); err != nil {
				t.log.Warn("serving /metrics", "err", err)
			}
		}()
		defer func() { stop(); <-served }()
	}
	served := make(chan struct{})
	go func() {
		t.server.Wait()
		close(served)
	}()
	iv := t.cfg.Interval.D()
	start := time.Now().Truncate(iv)
	timer := time.NewTimer(time.Until(start.Add(iv)))
	defer timer.Stop()
	var recs []Record
	var err error
	t.log.Info("serving", "source", t.cfg.Source, "mountpoint", t.mount, "socket", t.cfg.Socket, "interval", iv)
loop:
	for {
		select {
		case <-ctx.Done():
			err = t.unmount(served)
			break loop
		case <-served:
			t.log.Info("unmounted from outside", "mountpoint", t.mount)
			break loop
		case <-timer.C:
		}
		end := start.Add(iv)
		recs = t.flush(start, end, recs[:0])
		start = time.Now().Truncate(iv)
		if start.Before(end) {
			start = end
		}
		timer.Reset(time.Until(start.Add(iv)))
	}
	now := time.Now()
	if !now.After(start) {
		now = start.Add(1)
	}
	t.flush(start, now, nil)
	t.rep.offer(batch{bye: true})
	t.rep.close()
	st := &t.stats
	t.log.Info("stopped", "intervals_sent", st.Intervals.Load(), "intervals_dropped", st.Dropped.Load(),
		"connects", st.Connects.Load(), "folded_ops", t.folded.Load())
	return err
}

// flush hands the interval [start, end) to the reporter.
func (t *FS) flush(start, end time.Time, recs []Record) []Record {
	recs, folded := t.table.Flush(recs)
	t.folded.Store(folded)
	t.pids.tick()
	if len(recs) > 0 {
		// The reporter owns the slice from here: copy out of the reused one.
		t.rep.offer(batch{start: start, end: end, recs: append([]Record(nil), recs...)})
	}
	return recs
}

// unmount detaches the mount, retrying while files are open, then lazily.
func (t *FS) unmount(served <-chan struct{}) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := t.server.Unmount()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			t.log.Warn("mount busy; detaching lazily", "mountpoint", t.mount, "err", err)
			if err := syscall.Unmount(t.mount, syscall.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s: %w", t.mount, err)
			}
			return nil
		}
		select {
		case <-served:
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
