// Package procs samples the node's top processes by CPU and by resident
// memory, the "who is using this node" view of top(1), from /proc/<pid>.
package procs

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "procs",
		Description:  "top processes by CPU and resident memory from /proc/<pid>",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return DefaultConfig() },
		New:          func(c sampler.Configurable) sampler.Plugin { return New(c.(*Config)) },
		SampleConfig: sampleConfig,
		MinInterval:  MinInterval,
	})
}

// MinInterval: a sampler at 10 Hz lists /proc and reads every process's
// stat once a second only, unless the table asks for more. The listing is
// most of a 10 Hz tick's cost (about 0.8 ms of 1.5 on a small VM), and CPU
// times in USER_HZ (10 ms) give a 100 ms rate in steps of 0.1 core.
const MinInterval = time.Second

// Config is the [plugins.procs] table.
type Config struct {
	sampler.Common
	Top          int `toml:"top" comment:"processes reported by CPU and, separately, by resident memory (1-1000)"`
	MaxProcesses int `toml:"max_processes" comment:"most processes tracked; more are counted but not ranked"`
	MaxOpenFiles int `toml:"max_open_files" comment:"/proc/<pid> files kept open between ticks: stat, and status and io of the reported processes (0 = reopen every tick)"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{Top: 10, MaxProcesses: 65536, MaxOpenFiles: 4096}
}

// Validate checks the plugin-specific options.
func (c *Config) Validate() error {
	var errs []error
	if c.Top < 1 || c.Top > 1000 {
		errs = append(errs, fmt.Errorf("top must be between 1 and 1000, got %d", c.Top))
	}
	if c.MaxProcesses < 1 || c.MaxProcesses > 1<<22 {
		errs = append(errs, fmt.Errorf("max_processes must be between 1 and 4194304, got %d", c.MaxProcesses))
	}
	if c.MaxOpenFiles < 0 || c.MaxOpenFiles > 1<<20 {
		errs = append(errs, fmt.Errorf("max_open_files must be between 0 and 1048576, got %d", c.MaxOpenFiles))
	}
	return errors.Join(errs...)
}

// userHZ is the unit of the times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux architecture in use).
const userHZ = 100

// maxComm bounds the stored command name: the kernel's is at most 64
// bytes (workqueue threads show "kworker/u8:0-events_unbound").
const maxComm = 64

// proc is the state kept per process between ticks.
type proc struct {
	pid       int32
	statFD    int32 // /proc/<pid>/stat kept open, or -1
	statusFD  int32 // /proc/<pid>/status kept open while in a top set, or -1
	ioFD      int32 // /proc/<pid>/io, likewise
	start     uint64
	cpu       uint64 // utime+stime, clock ticks
	prevCPU   uint64
	prevNanos int64 // when prevCPU was read
	rate      float64
	rss       uint64 // bytes
	threads   uint64
	commLen   uint8
	hasPrev   bool
	top       bool // in a top set this tick
	comm      [maxComm]byte
	series    *series
}

func (p *proc) commBytes() []byte { return p.comm[:p.commLen] }

// series are the descriptors of one process, created when it first enters
// a top set and kept, with the process, until it exits (or changes command
// or owner), so steady-state ticks allocate nothing.
type series struct {
	uid                     uint32
	comm                    string // raw, to compare with stat's comm
	cpu, ratio, rss, thr    *metric.Desc
	readBytes, writtenBytes *metric.Desc
}

// Procs is the procs plugin.
type Procs struct {
	cfg      Config
	log      *slog.Logger
	dir      procDir
	pageSize uint64
	users    map[uint32]string
	openLeft int // files we may still keep open

	pids      []int32
	cur, prev []proc
	byCPU     []int
	byRSS     []int
	path      []byte
	buf       []byte

	nProcs, nThreads *metric.Desc
}

// New returns the plugin for cfg.
func New(cfg *Config) *Procs {
	return &Procs{cfg: *cfg}
}

// Init validates the config, loads user names and prepares buffers.
func (p *Procs) Init(env sampler.Env) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	p.log = env.Logger
	if p.log == nil {
		p.log = slog.Default()
	}
	p.dir = procDir{path: env.FS.Path("proc"), fd: -1}
	p.pageSize = uint64(os.Getpagesize())
	p.openLeft = fdBudget(p.cfg.MaxOpenFiles)
	passwd := env.FS.Path("etc", "passwd")
	data, err := kernfs.ReadFileInto(passwd, nil)
	switch {
	case err == nil:
		p.users = ParsePasswd(data)
	case errors.Is(err, fs.ErrNotExist):
		p.log.Debug("no passwd file, users are shown as uids", "path", passwd)
		p.users = map[uint32]string{}
	default:
		return fmt.Errorf("read %s: %w", passwd, err)
	}
	p.path = make([]byte, 0, 32)
	p.buf = make([]byte, 2048)
	p.byCPU = make([]int, 0, p.cfg.Top+1)
	p.byRSS = make([]int, 0, p.cfg.Top+1)
	p.nProcs = metric.NewDesc("vigil_processes", "Number of processes on the node.", metric.Gauge)
	p.nThreads = metric.NewDesc("vigil_processes_threads", "Number of threads of all processes on the node.", metric.Gauge)
	return nil
}

// Close releases the kept-open files.
func (p *Procs) Close() error {
	for i := range p.cur {
		p.forget(&p.cur[i])
	}
	p.cur = p.cur[:0]
	p.dir.close()
	return nil
}

// Sample reads every process, ranks them and emits the top ones.
func (p *Procs) Sample(ctx context.Context, now time.Time, b *metric.Batch) error {
	var err error
	if p.pids, err = p.dir.listPIDs(p.pids[:0]); err != nil {
		return err
	}
	slices.Sort(p.pids)

	// Merge the sorted listing with last tick's sorted state: processes
	// present in both carry over, the rest are new or gone.
	p.prev, p.cur = p.cur, p.prev[:0]
	var firstErr error
	nerr := 0
	var nprocs, nthreads uint64
	j := 0
	nowNanos := now.UnixNano()
	for _, pid := range p.pids {
		if ctx.Err() != nil {
			break
		}
		for j < len(p.prev) && p.prev[j].pid < pid {
			p.forget(&p.prev[j])
			j++
		}
		var st proc
		if j < len(p.prev) && p.prev[j].pid == pid {
			st = p.prev[j]
			j++
		} else {
			st = proc{pid: pid, statFD: -1, statusFD: -1, ioFD: -1}
		}
		st.top = false
		ok, err := p.readStat(&st, nowNanos)
		if err != nil {
			nerr++
			if firstErr == nil {
				firstErr = err
			}
		}
		if !ok {
			p.forget(&st)
			continue
		}
		nprocs++
		nthreads += st.threads
		if len(p.cur) < p.cfg.MaxProcesses {
			p.cur = append(p.cur, st)
		} else {
			p.forget(&st)
		}
	}
	for ; j < len(p.prev); j++ {
		p.forget(&p.prev[j])
	}
	clear(p.prev) // drop series pointers of exited processes

	p.byCPU = p.byCPU[:0]
	p.byRSS = p.byRSS[:0]
	for i := range p.cur {
		p.byCPU = insertTop(p.byCPU, p.cur, i, p.cfg.Top, moreCPU)
		p.byRSS = insertTop(p.byRSS, p.cur, i, p.cfg.Top, moreRSS)
	}
	for _, i := range p.byCPU {
		p.cur[i].top = true
	}
	for _, i := range p.byRSS {
		p.cur[i].top = true
	}
	for i := range p.cur {
		if !p.cur[i].top {
			p.closeTopFiles(&p.cur[i])
			continue
		}
		if err := p.emit(&p.cur[i], b); err != nil {
			nerr++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	b.Add(p.nProcs, float64(nprocs))
	b.Add(p.nThreads, float64(nthreads))
	if firstErr != nil {
		if nerr > 1 {
			return fmt.Errorf("%w (and %d more process errors)", firstErr, nerr-1)
		}
		return firstErr
	}
	return ctx.Err()
}

// forget closes what a process state holds.
func (p *Procs) forget(st *proc) {
	p.closeFD(&st.statFD)
	p.closeTopFiles(st)
}

// closeTopFiles closes the files read only for a process in a top set.
func (p *Procs) closeTopFiles(st *proc) {
	p.closeFD(&st.statusFD)
	p.closeFD(&st.ioFD)
}

func (p *Procs) closeFD(fd *int32) {
	if *fd >= 0 {
		closeFD(int(*fd))
		*fd = -1
		p.openLeft++
	}
}

// setPath puts "<pid>/<name>\x00" into p.path.
func (p *Procs) setPath(pid int32, name string) {
	p.path = strconv.AppendInt(p.path[:0], int64(pid), 10)
	p.path = append(p.path, '/')
	p.path = append(p.path, name...)
	p.path = append(p.path, 0)
}

// pathString names the file in p.path for an error message.
func (p *Procs) pathString() string {
	return p.dir.path + "/" + string(p.path[:len(p.path)-1])
}

// readFile reads <pid>/<name>, opening and closing it; its read may
// sleep (preadMaySleep).
func (p *Procs) readFile(pid int32, name string) ([]byte, error) {
	p.setPath(pid, name)
	fd, err := openat(p.dir.fd, p.path)
	if err != nil {
		return nil, err
	}
	var data []byte
	data, p.buf, err = preadMaySleep(fd, p.buf)
	closeFD(fd)
	return data, err
}

// readKept reads <pid>/<name> through *fd, opening it first if need be
// and keeping it open while the budget allows: a process in a top set is
// read every tick, and an open and a close cost more than the read.
// The file is closed when the process leaves the top sets or exits.
func (p *Procs) readKept(pid int32, fd *int32, name string, maySleep bool) (data []byte, err error) {
	read := pread
	if maySleep {
		read = preadMaySleep
	}
	p.setPath(pid, name)
	if *fd >= 0 {
		if data, p.buf, err = read(int(*fd), p.buf); err == nil {
			return data, nil
		}
		// Gone, or refused: opened again by path below, which tells.
		p.closeFD(fd)
	}
	f, err := openat(p.dir.fd, p.path)
	if err != nil {
		return nil, err
	}
	data, p.buf, err = read(f, p.buf)
	if err == nil && p.openLeft > 0 {
		*fd = int32(f)
		p.openLeft--
	} else {
		closeFD(f)
	}
	return data, err
}

// readStat refreshes st from /proc/<pid>/stat. ok is false when the
// process is gone or not readable; err is set only for content that makes
// no sense or an unexpected failure.
func (p *Procs) readStat(st *proc, nowNanos int64) (ok bool, err error) {
	var data []byte
	if st.statFD >= 0 {
		data, p.buf, err = pread(int(st.statFD), p.buf)
		if err != nil {
			// The process exited (ESRCH), perhaps with its pid reused:
			// reopen by path below.
			p.forget(st)
		}
	}
	if st.statFD < 0 {
		p.setPath(st.pid, "stat")
		fd, oerr := openat(p.dir.fd, p.path)
		if oerr != nil {
			if vanished(oerr) || denied(oerr) {
				return false, nil
			}
			return false, fmt.Errorf("open %s: %w", p.pathString(), oerr)
		}
		data, p.buf, err = pread(fd, p.buf)
		if err == nil && p.openLeft > 0 {
			st.statFD = int32(fd)
			p.openLeft--
		} else {
			closeFD(fd)
		}
	}
	if err != nil {
		if vanished(err) || denied(err) {
			return false, nil
		}
		return false, fmt.Errorf("read %s: %w", p.pathString(), err)
	}
	var s Stat
	if err := ParseStat(data, &s); err != nil {
		p.setPath(st.pid, "stat")
		return false, fmt.Errorf("%s: %w", p.pathString(), err)
	}
	cpu := s.UTime + s.STime
	switch {
	case !st.hasPrev || st.start != s.StartTime:
		// New process, or a new one under a reused pid: no rate yet.
		st.rate, st.prevCPU, st.prevNanos, st.hasPrev = 0, cpu, nowNanos, true
		st.start = s.StartTime
	case nowNanos > st.prevNanos:
		if cpu >= st.prevCPU {
			st.rate = float64(cpu-st.prevCPU) / userHZ / (float64(nowNanos-st.prevNanos) / 1e9)
		} else {
			st.rate = 0
		}
		st.prevCPU, st.prevNanos = cpu, nowNanos
	case nowNanos < st.prevNanos:
		// The clock went back: restart the interval.
		st.rate, st.prevCPU, st.prevNanos = 0, cpu, nowNanos
	}
	// Same tick time again (sample --once, tests): keep the last rate.
	st.cpu = cpu
	st.threads = s.Threads
	st.rss = s.RSSPages * p.pageSize
	if s.RSSPages > math.MaxUint64/p.pageSize {
		st.rss = math.MaxUint64 // only a corrupt file says so
	}
	st.commLen = uint8(copy(st.comm[:], s.Comm))
	return true, nil
}

// emit reads owner and I/O of a top process and appends its samples.
func (p *Procs) emit(st *proc, b *metric.Batch) error {
	data, err := p.readKept(st.pid, &st.statusFD, "status", false)
	if err != nil {
		if vanished(err) || denied(err) {
			return nil
		}
		return fmt.Errorf("read %s: %w", p.pathString(), err)
	}
	uid, err := ParseUID(data)
	if err != nil {
		return fmt.Errorf("%s: %w", p.pathString(), err)
	}
	var io IO
	hasIO := false
	data, err = p.readKept(st.pid, &st.ioFD, "io", true)
	switch {
	case err == nil:
		if err := ParseIO(data, &io); err != nil {
			return fmt.Errorf("%s: %w", p.pathString(), err)
		}
		hasIO = true
	case vanished(err) || denied(err):
		// Denied is normal without privileges for other users' processes;
		// kernels without task I/O accounting have no io file at all.
	default:
		return fmt.Errorf("read %s: %w", p.pathString(), err)
	}
	s := st.series
	if s == nil || s.uid != uid || s.comm != string(st.commBytes()) {
		// The Slurm job, if any, read once per series: a process does
		// not change jobs.
		job := ""
		if data, err := p.readFile(st.pid, "cgroup"); err == nil {
			job = ParseJob(data)
		}
		s = p.newSeries(st.pid, uid, st.commBytes(), job)
		st.series = s
	}
	b.Add(s.cpu, float64(st.cpu)/userHZ)
	b.Add(s.ratio, st.rate)
	b.Add(s.rss, float64(st.rss))
	b.Add(s.thr, float64(st.threads))
	if hasIO {
		b.Add(s.readBytes, float64(io.ReadBytes))
		b.Add(s.writtenBytes, float64(io.WriteBytes))
	}
	return nil
}

func (p *Procs) newSeries(pid int32, uid uint32, comm []byte, job string) *series {
	user, ok := p.users[uid]
	if !ok {
		user = strconv.FormatUint(uint64(uid), 10)
	}
	l := []string{"pid", strconv.Itoa(int(pid)), "user", user, "command", labelValue(comm)}
	if job != "" {
		l = append(l, "jobid", job)
	}
	return &series{
		uid:          uid,
		comm:         string(comm),
		cpu:          metric.NewDesc("vigil_process_cpu_seconds_total", "CPU time (user and system) used by the process.", metric.Counter, l...),
		ratio:        metric.NewDesc("vigil_process_cpu_usage_ratio", "CPU cores used by the process over the last interval.", metric.Gauge, l...),
		rss:          metric.NewDesc("vigil_process_resident_memory_bytes", "Resident memory of the process.", metric.Gauge, l...),
		thr:          metric.NewDesc("vigil_process_threads", "Threads of the process.", metric.Gauge, l...),
		readBytes:    metric.NewDesc("vigil_process_read_bytes_total", "Bytes the process caused to be read from storage.", metric.Counter, l...),
		writtenBytes: metric.NewDesc("vigil_process_write_bytes_total", "Bytes the process caused to be written to storage.", metric.Counter, l...),
	}
}

// labelValue makes a label value from kernel bytes, which need not be
// valid UTF-8 (a command name is whatever the program set).
func labelValue(b []byte) string {
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// moreCPU orders by CPU rate, then total CPU time (so the first tick,
// which has no rates yet, still shows the heaviest users), then pid.
func moreCPU(a, b *proc) bool {
	if a.rate != b.rate {
		return a.rate > b.rate
	}
	if a.cpu != b.cpu {
		return a.cpu > b.cpu
	}
	return a.pid < b.pid
}

func moreRSS(a, b *proc) bool {
	if a.rss != b.rss {
		return a.rss > b.rss
	}
	return a.pid < b.pid
}

// insertTop keeps top (indices into ps, best first) at most n long while
// offering index i: O(n) per process, fine for the small n of a top list.
func insertTop(top []int, ps []proc, i, n int, more func(a, b *proc) bool) []int {
	k := len(top)
	for k > 0 && more(&ps[i], &ps[top[k-1]]) {
		k--
	}
	if k >= n {
		return top
	}
	if len(top) < n {
		top = append(top, 0)
	}
	copy(top[k+1:], top[k:len(top)-1])
	top[k] = i
	return top
}
