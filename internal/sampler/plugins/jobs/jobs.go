// Package jobs samples the Slurm jobs running on the node from their
// cgroups (v1 and v2 layouts): CPU, memory, processes and I/O per job,
// as series labelled only with the job id.
package jobs

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "jobs",
		Description:  "Slurm jobs on the node from their cgroups (v1 and v2): vigil_job_*{job}",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return DefaultConfig() },
		New:          func(c sampler.Configurable) sampler.Plugin { return New(c.(*Config)) },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.jobs] table.
type Config struct {
	sampler.Common
	CgroupRoot   string           `toml:"cgroup_root" comment:"where the cgroup file systems are mounted, under the sampler's --root"`
	NodeName     string           `toml:"node_name" comment:"Slurm NodeName whose cgroups are read (slurm_<NodeName>, <NodeName>_slurmstepd.scope); empty = every one found"`
	MaxJobs      int              `toml:"max_jobs" comment:"jobs tracked at most; more are counted in vigil_jobs_untracked"`
	MaxIOPIDs    int              `toml:"max_io_pids" comment:"/proc/<pid>/io files read per tick over all jobs, where the cgroup has no io.stat"`
	MaxOpenFiles int              `toml:"max_open_files" comment:"cgroup files kept open between ticks (0 = reopen every tick)"`
	Rescan       sampler.Duration `toml:"rescan" comment:"how often a job's step and task directories, its limit and cpuset are re-read, and the hierarchy looked for when absent"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{CgroupRoot: "/sys/fs/cgroup", MaxJobs: 4096, MaxIOPIDs: 256, MaxOpenFiles: 4096,
		Rescan: sampler.Duration(10 * time.Second)}
}

// Validate checks the plugin-specific options.
func (c *Config) Validate() error {
	var errs []error
	if c.CgroupRoot == "" {
		errs = append(errs, errors.New("cgroup_root must not be empty"))
	}
	if c.NodeName != "" && (strings.ContainsAny(c.NodeName, "/\x00") || c.NodeName == "." || c.NodeName == "..") {
		errs = append(errs, fmt.Errorf("node_name %q is not a Slurm node name", c.NodeName))
	}
	if c.MaxJobs < 1 || c.MaxJobs > 1<<20 {
		errs = append(errs, fmt.Errorf("max_jobs must be between 1 and 1048576, got %d", c.MaxJobs))
	}
	if c.MaxIOPIDs < 0 || c.MaxIOPIDs > 1<<20 {
		errs = append(errs, fmt.Errorf("max_io_pids must be between 0 and 1048576, got %d", c.MaxIOPIDs))
	}
	if c.MaxOpenFiles < 0 || c.MaxOpenFiles > 1<<20 {
		errs = append(errs, fmt.Errorf("max_open_files must be between 0 and 1048576, got %d", c.MaxOpenFiles))
	}
	if d := time.Duration(c.Rescan); d < time.Second || d > time.Hour {
		errs = append(errs, fmt.Errorf("rescan must be between 1s and 1h, got %v", d))
	}
	return errors.Join(errs...)
}

// Series of one job, in emission order.
const (
	sRunning = iota
	sCPUUser
	sCPUSystem
	sCPUs
	sMemUsed
	sMemPeak
	sMemLimit
	sOOMKills
	sLimitHits
	sProcs
	sThreads
	sRead
	sWrite
	sUID
	nSeries
)

// NodeDescs returns the plugin's node series, in emission order: jobs
// tracked, ended, untracked, ignored entries, vanished, I/O reads skipped.
// The simulator (internal/simulate) emits the same.
func NodeDescs() [6]*metric.Desc {
	return [6]*metric.Desc{
		metric.NewDesc("vigil_jobs", "Slurm jobs with a cgroup on the node, tracked.", metric.Gauge),
		metric.NewDesc("vigil_jobs_ended_total", "Jobs whose cgroup went away (the job ended on this node).", metric.Counter),
		metric.NewDesc("vigil_jobs_untracked", "Jobs seen beyond max_jobs, not sampled.", metric.Gauge),
		metric.NewDesc("vigil_jobs_ignored_entries", "Directories in the Slurm cgroup tree whose names are not uid_<n> or job_<n> (or a known Slurm name).", metric.Gauge),
		metric.NewDesc("vigil_jobs_vanished_total", "Jobs whose cgroup disappeared while being read.", metric.Counter),
		metric.NewDesc("vigil_jobs_io_skipped_total", "/proc/<pid>/io reads skipped because max_io_pids was reached.", metric.Counter),
	}
}

// SeriesInfo describes one per-job series.
type SeriesInfo struct {
	Name, Help string
	Type       metric.Type
}

// PerJob are the series of one job, in emission order; the simulator
// (internal/simulate) emits the same.
var PerJob = [nSeries]SeriesInfo{
	{"vigil_job_running", "1 while the job's cgroup exists on the node, 0 on the tick it is found gone.", metric.Gauge},
	{"vigil_job_cpu_user_seconds_total", "CPU time the job's processes spent in user mode.", metric.Counter},
	{"vigil_job_cpu_system_seconds_total", "CPU time the job's processes spent in the kernel.", metric.Counter},
	{"vigil_job_cpus", "CPUs allocated to the job on the node (its cpuset).", metric.Gauge},
	{"vigil_job_memory_used_bytes", "Memory used by the job as jobstats counts it: anonymous (rss) plus shared memory, not page cache.", metric.Gauge},
	{"vigil_job_memory_peak_bytes", "Peak memory charged to the job's cgroup (page cache included) as the kernel records it.", metric.Gauge},
	{"vigil_job_memory_limit_bytes", "Memory limit of the job's cgroup; absent when unlimited.", metric.Gauge},
	{"vigil_job_oom_kills_total", "Processes of the job killed by the OOM killer.", metric.Counter},
	{"vigil_job_memory_limit_hits_total", "Times the job's memory usage hit its limit (reclaim forced).", metric.Counter},
	{"vigil_job_processes", "Processes of the job (Slurm's own slurmstepd not counted).", metric.Gauge},
	{"vigil_job_threads", "Threads of the job's processes.", metric.Gauge},
	{"vigil_job_read_bytes_total", "Bytes the job read from storage.", metric.Counter},
	{"vigil_job_write_bytes_total", "Bytes the job wrote to storage.", metric.Counter},
	{"vigil_job_uid", "Numeric user id the job runs as.", metric.Gauge},
}

// layout is the cgroup hierarchy in use.
type layout uint8

const (
	layoutNone layout = iota
	layoutV1
	layoutV2
)

// v1 controllers a job is read from; v2 has all files in one directory.
const (
	ctrlMemory = iota
	ctrlCPUAcct
	ctrlCPUSet
	ctrlFreezer
	nCtrl
)

var ctrlNames = [nCtrl]string{"memory", "cpuacct", "cpuset", "freezer"}

// root is one Slurm cgroup root: v1 slurm[_<node>] under each controller
// (primary: the one jobs are listed and processes counted from), or v2
// one [<node>_]slurmstepd.scope.
type root struct {
	ctrl    [nCtrl]string // v1: <cg>/<ctrl>/slurm[_node], "" where absent
	primary string        // v1: the first of memory, cpuacct, cpuset, freezer; v2: the scope
	dir     *dirFD        // primary
	uids    map[uint32]*uidDir
}

type uidDir struct {
	dir  *dirFD
	seen uint64
}

// leaf is a directory of a job's tree whose processes are counted.
type leaf struct {
	rel            string // path below the job directory
	procs, threads cgFile
	used           bool
}

// pidIO is what a process had read and written when last seen.
type pidIO struct {
	pid    int32
	f      cgFile // /proc/<pid>/io kept open (path only while opening)
	rd, wr uint64
	noIO   bool // the io file cannot be read
}

// job is the state kept per job between ticks.
type job struct {
	id    uint32
	uid   int64 // -1: not known yet
	seen  uint64
	ended bool
	dirZ  []byte // primary job directory, NUL-terminated

	cpu, mem, peak, events, oom, limit, cpuset, io cgFile
	stat                                           cgFile // v2 cgroup.stat
	descendants                                    uint64
	leaves                                         []leaf
	scanned                                        int64 // UnixNano of the last tree scan
	needScan                                       bool
	limitV, cpusV                                  float64
	hasLimit, hasCPUs                              bool

	pids, spare    []int32 // this tick's pids (sorted) and a reused buffer
	io2, io2spare  []pidIO
	rdSum, wrSum   uint64 // bytes of processes seen so far (v1, v2 without io.stat)
	procs, threads int

	d [nSeries]*metric.Desc
}

// Jobs is the jobs plugin.
type Jobs struct {
	cfg    Config
	log    *slog.Logger
	cg     string // cgroup root under the FS root
	proc   string // <root>/proc
	layout layout
	roots  []root
	jobs   map[uint32]*job
	order  []*job // sorted by id
	added  bool

	tick       uint64
	detectedAt int64 // UnixNano of the last layout detection, 0: never
	layoutMsg  string
	fds        fds

	buf           []byte               // file content, shared by every read
	dbufs         [maxDepth + 3][]byte // 0: roots, 1: uid dirs, 2+: a job's tree
	names         [maxDepth + 3][][]byte
	path          []byte
	rels          []byte // leaf paths found by a scan, '\n'-separated
	nrels         int
	ioPath        []byte
	vals          [nSeries]float64
	has           uint32
	keys          [3]uint64
	ioLeft        int
	firstErr      error
	nerr          int
	ignored       int
	untracked     int
	ended         uint64
	vanished      uint64
	ioSkipped     uint64
	nJobs, nEnded *metric.Desc
	nUntracked    *metric.Desc
	nIgnored      *metric.Desc
	nVanished     *metric.Desc
	nIOSkipped    *metric.Desc

	discovered func() // tests: called between listing and reading
}

// New returns the plugin for cfg.
func New(cfg *Config) *Jobs { return &Jobs{cfg: *cfg} }

// Init validates the config; a node without a cgroup file system has no
// jobs to read (ErrNotAvailable). Slurm's own directories may appear
// later: they are looked for every rescan interval until found.
func (p *Jobs) Init(env sampler.Env) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	p.log = env.Logger
	if p.log == nil {
		p.log = slog.Default()
	}
	p.cg = env.FS.Path(p.cfg.CgroupRoot)
	p.proc = env.FS.Path("proc")
	if !exists(append([]byte(p.cg), 0)) {
		p.log.Debug("no cgroup file system", "path", p.cg)
		return sampler.ErrNotAvailable
	}
	p.fds.left = fdBudget(p.cfg.MaxOpenFiles)
	p.jobs = make(map[uint32]*job)
	p.buf = make([]byte, 4096)
	d := NodeDescs()
	p.nJobs, p.nEnded, p.nUntracked, p.nIgnored, p.nVanished, p.nIOSkipped = d[0], d[1], d[2], d[3], d[4], d[5]
	return nil
}

// Close releases the files kept open.
func (p *Jobs) Close() error {
	for _, j := range p.order {
		p.release(j)
	}
	p.order = p.order[:0]
	clear(p.jobs)
	p.closeRoots()
	return nil
}

func (p *Jobs) closeRoots() {
	for _, r := range p.roots {
		r.dir.close()
		for _, u := range r.uids {
			u.dir.close()
		}
	}
}

// Sample lists the Slurm cgroup roots for jobs and samples each one.
func (p *Jobs) Sample(ctx context.Context, now time.Time, b *metric.Batch) error {
	p.tick++
	nowN := now.UnixNano()
	if p.layout == layoutNone {
		if p.detectedAt != 0 && nowN >= p.detectedAt && nowN-p.detectedAt < int64(p.cfg.Rescan) && len(p.order) == 0 {
			return sampler.ErrNotAvailable // nothing until the next look: costs nothing
		}
		if p.detectedAt == 0 || nowN < p.detectedAt || nowN-p.detectedAt >= int64(p.cfg.Rescan) {
			p.detect(nowN)
		}
	}
	p.firstErr, p.nerr, p.ignored, p.untracked, p.added = nil, 0, 0, 0, false
	if p.layout != layoutNone && !p.discover() {
		// A root went away (Slurm's cgroups removed): every job ends and
		// the hierarchy is looked for again next rescan.
		p.closeRoots()
		p.layout, p.roots = layoutNone, nil
	}
	if p.discovered != nil {
		p.discovered()
	}
	if p.added {
		slices.SortFunc(p.order, func(a, b *job) int { return int(int64(a.id) - int64(b.id)) })
	}
	p.ioLeft = p.cfg.MaxIOPIDs
	n := 0
	for _, j := range p.order {
		if ctx.Err() == nil && j.seen == p.tick && !j.ended {
			p.sampleJob(j, nowN, b)
		}
		if j.seen != p.tick || j.ended {
			b.Add(j.d[sRunning], 0)
			p.ended++
			p.release(j)
			delete(p.jobs, j.id)
			continue
		}
		p.order[n] = j
		n++
	}
	clear(p.order[n:])
	p.order = p.order[:n]
	if p.layout == layoutNone && n == 0 && p.ended == 0 {
		return sampler.ErrNotAvailable
	}
	b.Add(p.nJobs, float64(n))
	b.Add(p.nEnded, float64(p.ended))
	b.Add(p.nUntracked, float64(p.untracked))
	b.Add(p.nIgnored, float64(p.ignored))
	b.Add(p.nVanished, float64(p.vanished))
	b.Add(p.nIOSkipped, float64(p.ioSkipped))
	if p.firstErr != nil {
		if p.nerr > 1 {
			return fmt.Errorf("%w (and %d more errors)", p.firstErr, p.nerr-1)
		}
		return p.firstErr
	}
	return ctx.Err()
}

func (p *Jobs) fail(err error) {
	p.nerr++
	if p.firstErr == nil {
		p.firstErr = err
	}
}

// discover lists every root (and, for v1, every uid directory) and marks
// the jobs found as seen this tick. It reports false when a root is gone.
func (p *Jobs) discover() bool {
	for ri := range p.roots {
		r := &p.roots[ri]
		if err := r.dir.list(&p.dbufs[0], &p.names[0]); err != nil {
			if gone(err) {
				p.log.Info("Slurm cgroup root went away", "path", r.primary)
				return false
			}
			p.fail(fmt.Errorf("list %s: %w", r.primary, err))
			continue
		}
		if p.layout == layoutV2 {
			for _, name := range p.names[0] {
				if id, ok := parseID(name, "job_"); ok && id > 0 {
					p.touch(r, -1, id)
				} else if !knownV2(name) {
					p.ignored++
				}
			}
			continue
		}
		for _, name := range p.names[0] {
			uid, ok := parseID(name, "uid_")
			if !ok {
				if string(name) != "system" {
					p.ignored++
				}
				continue
			}
			u := r.uids[uid]
			if u == nil {
				u = &uidDir{dir: newDirFD(fmt.Appendf(nil, "%s/uid_%d\x00", r.primary, uid))}
				r.uids[uid] = u
			}
			u.seen = p.tick
			if err := u.dir.list(&p.dbufs[1], &p.names[1]); err != nil {
				if !gone(err) { // gone: the user's last job ended meanwhile
					p.fail(fmt.Errorf("list %s: %w", u.dir.pathZ[:len(u.dir.pathZ)-1], err))
				}
				continue
			}
			for _, jn := range p.names[1] {
				if id, ok := parseID(jn, "job_"); ok && id > 0 {
					p.touch(r, int64(uid), id)
				} else {
					p.ignored++
				}
			}
		}
		for uid, u := range r.uids {
			if u.seen != p.tick {
				u.dir.close()
				delete(r.uids, uid)
			}
		}
	}
	return true
}

// knownV2 are directories Slurm keeps in its scope besides jobs.
func knownV2(name []byte) bool {
	return string(name) == "system" || string(name) == "slurmd"
}

// touch marks job id of root r as seen, creating its state on first sight.
func (p *Jobs) touch(r *root, uid int64, id uint32) {
	j := p.jobs[id]
	if j == nil {
		if len(p.jobs) >= p.cfg.MaxJobs {
			p.untracked++
			return
		}
		j = p.newJob(r, uid, id)
		p.jobs[id] = j
		p.order = append(p.order, j)
		p.added = true
	} else if j.seen == p.tick {
		p.ignored++ // the same job under a second root (several slurmd on one host)
		return
	}
	j.seen = p.tick
}

func (p *Jobs) newJob(r *root, uid int64, id uint32) *job {
	j := &job{id: id, uid: uid, needScan: true}
	ids := strconv.FormatUint(uint64(id), 10)
	for i, s := range PerJob {
		j.d[i] = metric.NewDesc(s.Name, s.Help, s.Type, "jobid", ids)
	}
	dir := func(base string) []byte {
		if base == "" {
			return nil
		}
		if p.layout == layoutV2 {
			return []byte(base + "/job_" + ids)
		}
		return fmt.Appendf(nil, "%s/uid_%d/job_%s", base, uid, ids)
	}
	file := func(d []byte, name string) cgFile {
		if d == nil {
			return cgFile{fd: -1}
		}
		return newFile(append(append(d[:len(d):len(d)], '/'), name...))
	}
	if p.layout == layoutV2 {
		d := dir(r.primary)
		j.dirZ = append(d[:len(d):len(d)], 0)
		j.cpu, j.mem, j.peak = file(d, "cpu.stat"), file(d, "memory.stat"), file(d, "memory.peak")
		j.events, j.limit, j.cpuset = file(d, "memory.events"), file(d, "memory.max"), file(d, "cpuset.cpus.effective")
		j.io, j.stat = file(d, "io.stat"), file(d, "cgroup.stat")
		j.oom = cgFile{fd: -1}
		return j
	}
	d := dir(r.primary)
	j.dirZ = append(d[:len(d):len(d)], 0)
	mem := dir(r.ctrl[ctrlMemory])
	j.cpu = file(dir(r.ctrl[ctrlCPUAcct]), "cpuacct.stat")
	j.mem, j.peak = file(mem, "memory.stat"), file(mem, "memory.max_usage_in_bytes")
	j.events, j.oom, j.limit = file(mem, "memory.failcnt"), file(mem, "memory.oom_control"), file(mem, "memory.limit_in_bytes")
	j.cpuset = file(dir(r.ctrl[ctrlCPUSet]), "cpuset.cpus")
	j.io, j.stat = cgFile{fd: -1}, cgFile{fd: -1}
	return j
}

func (j *job) files() [9]*cgFile {
	return [...]*cgFile{&j.cpu, &j.mem, &j.peak, &j.events, &j.oom, &j.limit, &j.cpuset, &j.io, &j.stat}
}

// release closes what a job holds.
func (p *Jobs) release(j *job) {
	for _, f := range j.files() {
		p.fds.close(f)
	}
	for i := range j.leaves {
		p.fds.close(&j.leaves[i].procs)
		p.fds.close(&j.leaves[i].threads)
	}
	for i := range j.io2 {
		p.fds.close(&j.io2[i].f)
	}
}

// readJob reads one of a job's files. A missing file is not read again
// until the next scan; a job whose directory is gone is marked ended.
func (p *Jobs) readJob(j *job, f *cgFile) []byte {
	if !f.ok() || j.ended {
		return nil
	}
	data, err := p.fds.read(f, &p.buf)
	if err == nil {
		return data
	}
	p.fds.close(f)
	switch {
	case gone(err) && !exists(j.dirZ):
		j.ended = true
		p.vanished++
	case gone(err):
		// This kernel or configuration has no such file (memory.peak
		// before Linux 5.19, io.stat without the io controller).
		f.missing = true
	default:
		p.fail(fmt.Errorf("read %s: %w", f.name(), err))
	}
	return nil
}

var (
	v1CPUKeys    = []string{"user", "system"}
	v2CPUKeys    = []string{"user_usec", "system_usec"}
	v1MemKeys    = []string{"total_rss", "total_shmem"}
	v2MemKeys    = []string{"anon", "shmem"}
	v2EventKeys  = []string{"oom_kill", "max"}
	v1OOMKeys    = []string{"oom_kill"}
	v2StatKeys   = []string{"nr_descendants"}
	userHZ       = 100.0 // unit of cgroup v1 cpuacct.stat (USER_HZ)
	microsPerSec = 1e6
)

func (p *Jobs) set(i int, v float64) {
	p.vals[i] = v
	p.has |= 1 << i
}

// keyed parses a keyed file of f into p.keys; ok is false when not all
// keys were found or the content makes no sense (counted as an error).
func (p *Jobs) keyed(f *cgFile, data []byte, keys []string) bool {
	found, err := parseKeyed(data, keys, p.keys[:])
	if err != nil {
		p.fail(fmt.Errorf("%s: %w", f.name(), err))
		return false
	}
	return found == 1<<len(keys)-1
}

// sampleJob reads a job's files and, unless it turns out to be gone,
// appends its series.
func (p *Jobs) sampleJob(j *job, nowN int64, b *metric.Batch) {
	// cgroup v2 counts a job's descendant cgroups: a step that starts or
	// ends changes the count, so the tree needs no periodic walk.
	every := int64(p.cfg.Rescan)
	if data := p.readJob(j, &j.stat); data != nil {
		if p.keyed(&j.stat, data, v2StatKeys) {
			if p.keys[0] != j.descendants {
				j.descendants, j.needScan = p.keys[0], true
			}
			every *= v2RescanFactor
		}
	}
	if j.ended {
		return
	}
	scanned := false
	if j.needScan || j.procs == 0 || nowN < j.scanned || nowN-j.scanned >= every {
		p.scan(j, nowN)
		scanned = true
	}
	p.has = 0
	p.set(sRunning, 1)
	v2 := p.layout == layoutV2
	if data := p.readJob(j, &j.cpu); data != nil {
		if v2 && p.keyed(&j.cpu, data, v2CPUKeys) {
			p.set(sCPUUser, float64(p.keys[0])/microsPerSec)
			p.set(sCPUSystem, float64(p.keys[1])/microsPerSec)
		} else if !v2 && p.keyed(&j.cpu, data, v1CPUKeys) {
			p.set(sCPUUser, float64(p.keys[0])/userHZ)
			p.set(sCPUSystem, float64(p.keys[1])/userHZ)
		}
	}
	if data := p.readJob(j, &j.mem); data != nil {
		keys := v1MemKeys
		if v2 {
			keys = v2MemKeys
		}
		// Old kernels have no shmem line: rss alone then.
		if found, err := parseKeyed(data, keys, p.keys[:]); err != nil {
			p.fail(fmt.Errorf("%s: %w", j.mem.name(), err))
		} else if found&1 != 0 {
			if found&2 == 0 {
				p.keys[1] = 0
			}
			p.set(sMemUsed, float64(p.keys[0]+p.keys[1]))
		}
	}
	if data := p.readJob(j, &j.peak); data != nil {
		if v, err := parseUint(data); err != nil {
			p.fail(fmt.Errorf("%s: %w", j.peak.name(), err))
		} else {
			p.set(sMemPeak, float64(v))
		}
	}
	if data := p.readJob(j, &j.events); data != nil {
		if v2 {
			if p.keyed(&j.events, data, v2EventKeys) {
				p.set(sOOMKills, float64(p.keys[0]))
				p.set(sLimitHits, float64(p.keys[1]))
			}
		} else if v, err := parseUint(data); err != nil {
			p.fail(fmt.Errorf("%s: %w", j.events.name(), err))
		} else {
			p.set(sLimitHits, float64(v))
		}
	}
	if data := p.readJob(j, &j.oom); data != nil && p.keyed(&j.oom, data, v1OOMKeys) {
		p.set(sOOMKills, float64(p.keys[0]))
	}
	if data := p.readJob(j, &j.io); data != nil {
		if rd, wr, err := parseIOStat(data); err != nil {
			p.fail(fmt.Errorf("%s: %w", j.io.name(), err))
		} else {
			p.set(sRead, float64(rd))
			p.set(sWrite, float64(wr))
		}
	}
	if j.ended {
		return
	}
	p.countProcs(j, scanned && j.uid < 0)
	if scanned && j.uid < 0 && len(j.pids) > 0 {
		j.uid = p.procUID(j.pids[0])
	}
	if !j.io.ok() { // v1, or v2 without the io controller
		p.procIO(j)
		p.set(sRead, float64(j.rdSum))
		p.set(sWrite, float64(j.wrSum))
	}
	p.set(sProcs, float64(j.procs))
	p.set(sThreads, float64(j.threads))
	if j.hasLimit {
		p.set(sMemLimit, j.limitV)
	}
	if j.hasCPUs {
		p.set(sCPUs, j.cpusV)
	}
	if j.uid >= 0 {
		p.set(sUID, float64(j.uid))
	}
	for i := range nSeries {
		if p.has&(1<<i) != 0 {
			b.Add(j.d[i], p.vals[i])
		}
	}
}

// countProcs reads the process and thread lists of the job's leaves;
// the pids go to j.pids when their I/O is read from /proc.
func (p *Jobs) countProcs(j *job, wantPIDs bool) {
	j.procs, j.threads = 0, 0
	var pids *[]int32
	if !j.io.ok() || wantPIDs {
		j.pids, j.spare = j.spare[:0], j.pids
		pids = &j.pids
	}
	for i := range j.leaves {
		l := &j.leaves[i]
		data, err := p.fds.read(&l.procs, &p.buf)
		if err == nil {
			var n int
			n, err = parsePIDs(data, pids, maxPIDsPerJob)
			j.procs += n
			if err != nil {
				p.fail(fmt.Errorf("%s: %w", l.procs.name(), err))
			}
		}
		if err == nil {
			if data, err = p.fds.read(&l.threads, &p.buf); err == nil {
				n, _ := parsePIDs(data, nil, 0)
				j.threads += n
			}
		}
		if err != nil && gone(err) {
			j.needScan = true // a step ended
		} else if err != nil && !errors.Is(err, errFormat) {
			p.fail(fmt.Errorf("read %s: %w", l.procs.name(), err))
		}
	}
	if pids != nil {
		slices.Sort(j.pids)
	}
}

// procExists reports whether /proc/<pid> exists.
func (p *Jobs) procExists(pid int32) bool {
	p.ioPath = append(strconv.AppendInt(append(append(p.ioPath[:0], p.proc...), '/'), int64(pid), 10), 0)
	return exists(p.ioPath)
}

// procUID is the real uid of a process (cgroup v2 paths do not name the
// user), -1 if it cannot be read. Asked at scans only.
func (p *Jobs) procUID(pid int32) int64 {
	p.ioPath = append(strconv.AppendInt(append(append(p.ioPath[:0], p.proc...), '/'), int64(pid), 10), "/status\x00"...)
	f := cgFile{path: p.ioPath, fd: -1}
	saved := p.fds.left
	p.fds.left = 0
	data, err := p.fds.read(&f, &p.buf)
	p.fds.left = saved
	if err != nil {
		return -1
	}
	var uid [1]uint64
	if found, err := parseKeyed(data, statusUIDKey[:], uid[:]); err != nil || found != 1 || uid[0] > 1<<32-1 {
		return -1
	}
	return int64(uid[0])
}

var statusUIDKey = [1]string{"Uid:"}

// v2RescanFactor stretches the periodic walk of a job's tree on cgroup v2,
// where cgroup.stat tells when it changed; what the walk also re-reads
// (memory limit, cpuset) changes only by hand.
const v2RescanFactor = 6

// maxPIDsPerJob bounds the processes whose I/O is followed per job.
const maxPIDsPerJob = 65536

// procIO adds to the job's I/O totals what each of its processes read and
// wrote since last seen: a process that exits takes with it only what it
// did since the previous tick, and the totals never go down. Each
// process's io file stays open while it lives and the budget allows.
func (p *Jobs) procIO(j *job) {
	prev := j.io2
	next := j.io2spare[:0]
	k := 0
	for _, pid := range j.pids {
		for k < len(prev) && prev[k].pid < pid {
			p.fds.close(&prev[k].f)
			k++
		}
		st := pidIO{pid: pid, f: cgFile{fd: -1}}
		known := false
		if k < len(prev) && prev[k].pid == pid {
			st, known = prev[k], true
			k++
		}
		if st.noIO {
			next = append(next, st) // unreadable: not tried again while it lives
			continue
		}
		if p.ioLeft <= 0 {
			p.ioSkipped++
			if known {
				next = append(next, st)
			}
			continue
		}
		p.ioLeft--
		var data []byte
		var err error
		if st.f.fd >= 0 {
			if data, err = pread(int(st.f.fd), &p.buf); err != nil {
				p.fds.close(&st.f) // ESRCH: the process exited
			}
		} else {
			p.ioPath = append(strconv.AppendInt(append(append(p.ioPath[:0], p.proc...), '/'), int64(pid), 10), "/io\x00"...)
			st.f.path = p.ioPath
			data, err = p.fds.read(&st.f, &p.buf)
			st.f.path = nil
		}
		if err != nil {
			if !gone(err) && !denied(err) {
				p.fail(fmt.Errorf("read %s/%d/io: %w", p.proc, pid, err))
			}
			if st.f.fd < 0 && !known && (denied(err) || gone(err) && p.procExists(pid)) {
				// Another user's process without privileges, or a kernel
				// without task I/O accounting.
				st.noIO = true
				next = append(next, st)
			}
			continue
		}
		rd, wr, err := parseIO(data)
		if err != nil {
			p.fds.close(&st.f)
			p.fail(fmt.Errorf("%s/%d/io: %w", p.proc, pid, err))
			continue
		}
		if !known || rd < st.rd || wr < st.wr {
			// New to the job (or a new process under a reused pid): all
			// its I/O was done as part of the job.
			j.rdSum += rd
			j.wrSum += wr
		} else {
			j.rdSum += rd - st.rd
			j.wrSum += wr - st.wr
		}
		st.rd, st.wr = rd, wr
		next = append(next, st)
	}
	for ; k < len(prev); k++ {
		p.fds.close(&prev[k].f)
	}
	clear(prev)
	j.io2, j.io2spare = next, prev[:0]
}
