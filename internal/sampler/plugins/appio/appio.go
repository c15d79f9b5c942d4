// Package appio is the sampler side of application I/O: it listens on the
// appio socket for libvigilio and `vigil iofs`, attributes each
// connection to its Slurm job from the kernel's credentials, and turns
// their per-file interval records into bounded series per job and file
// system (docs/appio.md, protocol in docs/format/appio.md).
package appio

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

//go:embed sample.toml
var sampleConfig string

func init() {
	sampler.Register(sampler.Registration{
		Name:         "appio",
		Description:  "application I/O from libvigilio and vigil iofs over the appio socket: vigil_appio_*{jobid,mountpoint}",
		Default:      true,
		NewConfig:    func() sampler.Configurable { return DefaultConfig() },
		New:          func(c sampler.Configurable) sampler.Plugin { return New(c.(*Config)) },
		SampleConfig: sampleConfig,
	})
}

// Config is the [plugins.appio] table.
type Config struct {
	sampler.Common
	Socket         string           `toml:"socket" comment:"Unix socket (SOCK_SEQPACKET) the library connects to, under the sampler's --root"`
	MaxConns       int              `toml:"max_conns" comment:"connections (processes) at most; more are refused and counted"`
	MaxConnsPerUID int              `toml:"max_conns_per_uid" comment:"connections of one user at most, so one user cannot take every place"`
	MaxJobs        int              `toml:"max_jobs" comment:"jobs with series at most; the I/O of more goes to jobid=\"other\""`
	MaxMounts      int              `toml:"max_mounts" comment:"file systems per job with series at most; more go to mountpoint=\"other\""`
	MaxFilesPerJob int              `toml:"max_files_per_job" comment:"files known at once over a job's connections; records of more go to mountpoint=\"other\""`
	IOFSUIDs       []uint32         `toml:"iofs_uids" comment:"uids whose connections may report other processes' I/O (vigil iofs)"`
	Grace          sampler.Duration `toml:"grace" comment:"how long a job's series go on after its last process left"`
	RecentRecords  int              `toml:"recent_records" comment:"per-file interval records kept in memory for shipping upstream"`
	Rescan         sampler.Duration `toml:"rescan" comment:"how often mountinfo is re-read and a socket that could not be made or went away is made again"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{Socket: appio.DefaultSocket, MaxConns: 4096, MaxConnsPerUID: 1024, MaxJobs: 64, MaxMounts: 16,
		MaxFilesPerJob: 65536, IOFSUIDs: []uint32{0}, Grace: sampler.Duration(time.Minute),
		RecentRecords: 4096, Rescan: sampler.Duration(10 * time.Second)}
}

// Validate checks the plugin-specific options.
func (c *Config) Validate() error {
	var errs []error
	if c.Socket == "" || !strings.HasPrefix(c.Socket, "/") {
		errs = append(errs, fmt.Errorf("socket must be an absolute path, got %q", c.Socket))
	}
	bound := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s must be between %d and %d, got %d", name, lo, hi, v))
		}
	}
	bound("max_conns", c.MaxConns, 1, 1<<20)
	bound("max_conns_per_uid", c.MaxConnsPerUID, 1, 1<<20)
	bound("max_jobs", c.MaxJobs, 1, 4096)
	bound("max_mounts", c.MaxMounts, 1, 256)
	bound("max_files_per_job", c.MaxFilesPerJob, 1, 1<<22)
	bound("recent_records", c.RecentRecords, 0, 1<<22)
	if len(c.IOFSUIDs) > 64 {
		errs = append(errs, fmt.Errorf("iofs_uids has %d entries, at most 64", len(c.IOFSUIDs)))
	}
	if d := time.Duration(c.Grace); d < 0 || d > time.Hour {
		errs = append(errs, fmt.Errorf("grace must be between 0 and 1h, got %v", d))
	}
	if d := time.Duration(c.Rescan); d < 100*time.Millisecond || d > time.Hour {
		errs = append(errs, fmt.Errorf("rescan must be between 100ms and 1h, got %v", d))
	}
	return errors.Join(errs...)
}

// Series of one (job, mount point), in emission order.
const (
	sBytesRead = iota
	sBytesWritten
	sCallOpen
	sCallClose
	sCallRead
	sCallWrite
	sCallSeek
	sCallSync
	sCallStat
	sCallMmap
	sCallMeta
	sSecRead
	sSecWrite
	sSecMeta
	sSeq
	sRandom
	sSizeRead                               // NBuckets cumulative buckets
	sSizeWrite = sSizeRead + appio.NBuckets // NBuckets cumulative buckets
	nSeries    = sSizeWrite + appio.NBuckets
)

// counterOf is the record counter each of the first sSizeRead series adds up.
var counterOf = [sSizeRead]int{
	appio.BytesRead, appio.BytesWritten,
	appio.Opens, appio.Closes, appio.Reads, appio.Writes, appio.Seeks, appio.Syncs, appio.Stats, appio.Mmaps, appio.MetaOther,
	appio.ReadNS, appio.WriteNS, appio.MetaNS,
	appio.SeqAccesses, appio.RandomAccesses,
}

// Other is the label value of what the caps fold: jobs beyond max_jobs,
// mount points beyond max_mounts, files without a known path.
const Other = "other"

// newDescs builds the series of one (job, mount point).
func newDescs(job, mp, fstype string) [nSeries]*metric.Desc {
	var d [nSeries]*metric.Desc
	l := func(name, help string, extra ...string) *metric.Desc {
		return metric.NewDesc(name, help, metric.Counter, append([]string{"jobid", job, "mountpoint", mp, "fstype", fstype}, extra...)...)
	}
	const (
		hb = "Bytes the job's processes read or wrote through the I/O library on this file system."
		hc = "I/O calls of the job's processes on this file system, by operation (meta: rename, unlink, dup, fcntl, close_range, msync, munmap)."
		hs = "Seconds the job's processes spent in I/O calls on this file system (meta: open, close, stat, seek, sync and the other metadata calls)."
		ha = "Reads and writes that started where the previous one on the same descriptor ended (sequential) or not (random)."
		hz = "Reads or writes of at most le bytes (Darshan's size buckets), cumulative."
	)
	d[sBytesRead] = l("vigil_appio_bytes_total", hb, "op", "read")
	d[sBytesWritten] = l("vigil_appio_bytes_total", hb, "op", "write")
	for i, op := range []string{"open", "close", "read", "write", "seek", "sync", "stat", "mmap", "meta"} {
		d[sCallOpen+i] = l("vigil_appio_calls_total", hc, "op", op)
	}
	for i, op := range []string{"read", "write", "meta"} {
		d[sSecRead+i] = l("vigil_appio_seconds_total", hs, "op", op)
	}
	d[sSeq] = l("vigil_appio_accesses_total", ha, "pattern", "sequential")
	d[sRandom] = l("vigil_appio_accesses_total", ha, "pattern", "random")
	for i, le := range appio.BucketLabels {
		d[sSizeRead+i] = l("vigil_appio_access_size_total", hz, "op", "read", "le", le)
		d[sSizeWrite+i] = l("vigil_appio_access_size_total", hz, "op", "write", "le", le)
	}
	return d
}

// mountAcc is what a job did on one file system since it was first seen.
type mountAcc struct {
	point, fstype string
	v             [nSeries]uint64 // size buckets per bucket, not cumulative
	d             [nSeries]*metric.Desc
}

// jobAcc is one job's accumulated I/O.
type jobAcc struct {
	id     string
	procs  int       // connections attributed to the job
	files  int       // files known over its connections
	active time.Time // last record or disconnect
	mounts []*mountAcc
	dProcs *metric.Desc
}

// Self series.
const (
	selfConns = iota
	selfAccepted
	selfRejectedCap
	selfRejectedBad
	selfRecords
	selfFoldedFile
	selfFoldedMount
	selfFoldedJob
	selfJobs
	selfStale
	selfUnshipped
	selfUpstreamDropped
	nSelf
)

func selfDescs() [nSelf]*metric.Desc {
	const (
		hr = "Connections refused (max_conns) or closed for a protocol violation."
		hf = "Interval records accounted under \"other\": file without a known path or beyond max_files_per_job, mount point beyond max_mounts, job beyond max_jobs."
	)
	return [nSelf]*metric.Desc{
		metric.NewDesc("vigil_appio_connections", "Processes connected to the appio socket.", metric.Gauge),
		metric.NewDesc("vigil_appio_connections_total", "Connections accepted on the appio socket.", metric.Counter),
		metric.NewDesc("vigil_appio_rejected_total", hr, metric.Counter, "reason", "max_conns"),
		metric.NewDesc("vigil_appio_rejected_total", hr, metric.Counter, "reason", "protocol"),
		metric.NewDesc("vigil_appio_records_total", "Per-file interval records received.", metric.Counter),
		metric.NewDesc("vigil_appio_folded_records_total", hf, metric.Counter, "reason", "file"),
		metric.NewDesc("vigil_appio_folded_records_total", hf, metric.Counter, "reason", "mount"),
		metric.NewDesc("vigil_appio_folded_records_total", hf, metric.Counter, "reason", "job"),
		metric.NewDesc("vigil_appio_jobs", "Jobs with appio series on the node.", metric.Gauge),
		metric.NewDesc("vigil_appio_stale_ticks_total", "Ticks that sent the previous copy of the series because a connection held them.", metric.Counter),
		metric.NewDesc("vigil_appio_unshipped_records_total", "Per-file records not sent upstream: more than 16,384 waited.", metric.Counter),
		metric.NewDesc("vigil_appio_upstream_dropped_records_total", "Per-file records the upstream queue let go (its record bound passed while the upstream was away).", metric.Counter),
	}
}

// FileRecord is one file's (and process's) I/O over one interval, as
// kept for shipping to the server's per-file record store. The node is
// the sampler's own.
type FileRecord = appio.FileRecord

// Plugin is the appio plugin.
type Plugin struct {
	cfg  Config
	log  *slog.Logger
	fs   kernfs.FS
	path string // the socket, under the root

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	lnMu      sync.Mutex
	ln        *net.UnixListener
	lnIno     uint64
	listening atomic.Bool
	conns     map[*conn]struct{}
	perUID    map[uint32]int
	warned    bool

	mounts atomic.Pointer[mountTable]
	// mountMu orders the re-reads of the watcher and the rescan, so an
	// older read never replaces a newer table.
	mountMu sync.Mutex

	// mu guards the accumulated state; connections hold it for one
	// message, the tick only tries it.
	mu    sync.Mutex
	jobs  map[string]*jobAcc
	order []*jobAcc // by id
	// retired are jobs whose grace ended, kept (at most max_jobs, the
	// longest idle dropped first) so that a later process of the same job
	// carries on from their totals instead of restarting them at zero.
	retired  map[string]*jobAcc
	ring     []FileRecord
	ringNext int
	ringLen  int
	// pathBytes is the length of every known file's path (maxPathBytes).
	pathBytes int

	nConns                               atomic.Int64
	accepted, rejCap, rejBad, nRecords   atomic.Uint64
	foldFile, foldMount, foldJob, nJobsV atomic.Uint64
	stale                                atomic.Uint64 // ticks that found the lock held
	starved                              atomic.Bool   // the last tick found it held

	// The tick's own copy, refreshed when the lock is free.
	snapD []*metric.Desc
	snapV []float64
	self  [nSelf]*metric.Desc

	// jobOf maps a pid to its Slurm job from its cgroup ("" for none);
	// tests replace it.
	jobOf func(pid uint32) string
	bufs  sync.Pool // message buffers
	recs  sync.Pool // decoded records

	// ship takes records up the tree (sampler.Env.IORecords; nil: not
	// shipped); pending (under mu) wait for the shipper, at most
	// maxPending, the rest counted in unshipped.
	ship        func([]FileRecord)
	shipDropped func() uint64
	pending     []FileRecord
	shipWake    chan struct{}
	unshipped   atomic.Uint64
}

// maxPending bounds the records waiting to be shipped: an interval of
// 16,384 files and processes on one node.
const maxPending = 16384

// shipDelay is how long the shipper waits after an interval's first
// record for the node's other processes to report theirs, so they go in
// one frame: well under the interval, so records reach the server within
// about 1 s of their interval's end.
const shipDelay = 100 * time.Millisecond

// New returns the plugin for cfg.
func New(cfg *Config) *Plugin { return &Plugin{cfg: *cfg} }

// Init checks the config and starts listening. A socket that cannot be
// made (not root, read-only /run) is logged once and tried again every
// rescan interval; the plugin reports nothing meanwhile.
func (p *Plugin) Init(env sampler.Env) error {
	if err := p.cfg.Validate(); err != nil {
		return err
	}
	if !supported {
		return sampler.ErrNotAvailable
	}
	p.log = env.Logger
	if p.log == nil {
		p.log = slog.Default()
	}
	p.fs = env.FS
	p.path = env.FS.Path(p.cfg.Socket)
	p.jobs = make(map[string]*jobAcc)
	p.conns = make(map[*conn]struct{})
	p.perUID = make(map[uint32]int)
	p.ring = make([]FileRecord, p.cfg.RecentRecords)
	p.self = selfDescs()
	if p.jobOf == nil {
		p.jobOf = p.cgroupJob
	}
	p.bufs.New = func() any { b := make([]byte, appio.MaxMessage); return &b }
	p.recs.New = func() any { r := make([]appio.Record, 0, appio.MaxRecords); return &r }
	p.mounts.Store(&mountTable{})
	p.loadMounts()
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if env.IORecords != nil {
		p.ship, p.shipDropped = env.IORecords, env.IORecordsDropped
		p.shipWake = make(chan struct{}, 1)
		p.wg.Add(1)
		go p.shipper()
	}
	p.listen()
	p.wg.Add(2)
	go p.housekeep()
	go func() {
		defer p.wg.Done()
		watchMounts(p.ctx, p.fs.Path("proc/self/mountinfo"), p.loadMounts)
	}()
	return nil
}

// Sample appends the latest accumulated series. It never waits for the
// connections: when one holds the lock, the previous copy is sent.
func (p *Plugin) Sample(_ context.Context, now time.Time, b *metric.Batch) error {
	if p.mu.TryLock() {
		p.copyLocked(now)
		p.starved.Store(false)
		p.mu.Unlock()
	} else {
		// Connections let the next tick in first (lock), so a flood of
		// records delays the series by a tick, not indefinitely.
		p.starved.Store(true)
		p.stale.Add(1)
	}
	if !p.listening.Load() && len(p.snapD) == 0 {
		return sampler.ErrNotAvailable
	}
	for i, d := range p.snapD {
		b.Add(d, p.snapV[i])
	}
	b.Add(p.self[selfConns], float64(p.nConns.Load()))
	b.Add(p.self[selfAccepted], float64(p.accepted.Load()))
	b.Add(p.self[selfRejectedCap], float64(p.rejCap.Load()))
	b.Add(p.self[selfRejectedBad], float64(p.rejBad.Load()))
	b.Add(p.self[selfRecords], float64(p.nRecords.Load()))
	b.Add(p.self[selfFoldedFile], float64(p.foldFile.Load()))
	b.Add(p.self[selfFoldedMount], float64(p.foldMount.Load()))
	b.Add(p.self[selfFoldedJob], float64(p.foldJob.Load()))
	b.Add(p.self[selfJobs], float64(p.nJobsV.Load()))
	b.Add(p.self[selfStale], float64(p.stale.Load()))
	b.Add(p.self[selfUnshipped], float64(p.unshipped.Load()))
	var dropped uint64
	if p.shipDropped != nil {
		dropped = p.shipDropped()
	}
	b.Add(p.self[selfUpstreamDropped], float64(dropped))
	return nil
}

// lock takes the state for a connection, first letting in a tick that
// found it held (for at most 2 s: a tick is never that far away).
func (p *Plugin) lock() {
	if p.starved.Load() {
		deadline := time.Now().Add(2 * time.Second)
		for p.starved.Load() && time.Now().Before(deadline) {
			time.Sleep(200 * time.Microsecond)
		}
	}
	p.mu.Lock()
}

// copyLocked ends the jobs whose grace is over and copies the series of
// the others into the tick's snapshot (no allocation once it has grown).
func (p *Plugin) copyLocked(now time.Time) {
	grace := time.Duration(p.cfg.Grace)
	n := 0
	for _, j := range p.order {
		if j.procs == 0 && now.Sub(j.active) > grace {
			delete(p.jobs, j.id)
			p.retire(j)
			continue
		}
		p.order[n] = j
		n++
	}
	clear(p.order[n:])
	p.order = p.order[:n]
	p.nJobsV.Store(uint64(n))
	p.snapD, p.snapV = p.snapD[:0], p.snapV[:0]
	for _, j := range p.order {
		p.snapD = append(p.snapD, j.dProcs)
		p.snapV = append(p.snapV, float64(j.procs))
		for _, m := range j.mounts {
			for i := range sSizeRead {
				v := float64(m.v[i])
				if i >= sSecRead && i <= sSecMeta {
					v /= 1e9
				}
				p.snapD = append(p.snapD, m.d[i])
				p.snapV = append(p.snapV, v)
			}
			for _, base := range [2]int{sSizeRead, sSizeWrite} {
				var cum uint64
				for k := range appio.NBuckets {
					cum = satAdd(cum, m.v[base+k])
					p.snapD = append(p.snapD, m.d[base+k])
					p.snapV = append(p.snapV, float64(cum))
				}
			}
		}
	}
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

// Recent returns the per-file interval records kept, oldest first (at
// most recent_records). It is the hook for sending them up the tree to
// the server's per-file record store.
func (p *Plugin) Recent() []FileRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]FileRecord, 0, p.ringLen)
	start := p.ringNext - p.ringLen
	if start < 0 {
		start += len(p.ring)
	}
	for i := range p.ringLen {
		out = append(out, p.ring[(start+i)%len(p.ring)])
	}
	return out
}

// Close stops listening, drops every connection and removes the socket
// if it is still the one this plugin made.
func (p *Plugin) Close() error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	p.lnMu.Lock()
	p.closeListener(true)
	for c := range p.conns {
		c.c.Close()
	}
	p.lnMu.Unlock()
	p.wg.Wait()
	return nil
}

// job returns the accumulator of job id, made on first sight; beyond
// max_jobs, the "other" one. Called with mu held.
func (p *Plugin) job(id string, now time.Time) *jobAcc {
	if j := p.jobs[id]; j != nil {
		return j
	}
	if len(p.jobs) >= p.cfg.MaxJobs && id != Other {
		p.foldJob.Add(1)
		return p.job(Other, now)
	}
	j := p.retired[id]
	if j != nil {
		delete(p.retired, id)
		j.active = now
	} else {
		j = &jobAcc{id: id, active: now,
			dProcs: metric.NewDesc("vigil_appio_processes", "Processes of the job connected to the appio socket.", metric.Gauge, "jobid", id)}
	}
	p.jobs[id] = j
	p.order = append(p.order, j)
	slices.SortFunc(p.order, func(a, b *jobAcc) int { return strings.Compare(a.id, b.id) })
	return j
}

// retire keeps an ended job's totals, dropping the longest idle retired
// job beyond max_jobs. Called with mu held.
func (p *Plugin) retire(j *jobAcc) {
	if p.retired == nil {
		p.retired = make(map[string]*jobAcc)
	}
	if len(p.retired) >= p.cfg.MaxJobs {
		var oldest *jobAcc
		for _, r := range p.retired {
			if oldest == nil || r.active.Before(oldest.active) {
				oldest = r
			}
		}
		delete(p.retired, oldest.id)
	}
	p.retired[j.id] = j
}

// mount returns the job's accumulator for a file system; beyond
// max_mounts, the "other" one. Called with mu held.
func (p *Plugin) mount(j *jobAcc, point, fstype string) *mountAcc {
	for _, m := range j.mounts {
		if m.point == point && m.fstype == fstype {
			return m
		}
	}
	if len(j.mounts) >= p.cfg.MaxMounts && point != Other {
		p.foldMount.Add(1)
		return p.mount(j, Other, "")
	}
	m := &mountAcc{point: point, fstype: fstype, d: newDescs(j.id, point, fstype)}
	j.mounts = append(j.mounts, m)
	slices.SortFunc(j.mounts, func(a, b *mountAcc) int {
		if c := strings.Compare(a.point, b.point); c != 0 {
			return c
		}
		return strings.Compare(a.fstype, b.fstype)
	})
	return m
}

// add accumulates one record. Called with mu held.
func (m *mountAcc) add(r *appio.Record) {
	for i, c := range counterOf {
		m.v[i] = satAdd(m.v[i], r.C[c])
	}
	for k := range appio.NBuckets {
		m.v[sSizeRead+k] = satAdd(m.v[sSizeRead+k], r.C[appio.ReadHist+k])
		m.v[sSizeWrite+k] = satAdd(m.v[sSizeWrite+k], r.C[appio.WriteHist+k])
	}
}

// keep puts a record in the ring. Called with mu held.
func (p *Plugin) keep(fr *FileRecord) {
	if len(p.ring) == 0 {
		return
	}
	p.ring[p.ringNext] = *fr
	p.ringNext = (p.ringNext + 1) % len(p.ring)
	if p.ringLen < len(p.ring) {
		p.ringLen++
	}
	if p.ship == nil {
		return
	}
	if len(p.pending) >= maxPending {
		p.unshipped.Add(1)
		return
	}
	p.pending = append(p.pending, *fr)
	select {
	case p.shipWake <- struct{}{}:
	default:
	}
}

// shipper hands pending records to ship shortly after they arrive, and
// the last ones when the plugin closes.
func (p *Plugin) shipper() {
	defer p.wg.Done()
	var spare []FileRecord
	flush := func() {
		p.mu.Lock()
		batch := p.pending
		p.pending = spare[:0]
		p.mu.Unlock()
		if len(batch) > 0 {
			p.ship(batch)
		}
		clear(batch) // let go of the strings
		spare = batch
	}
	for {
		select {
		case <-p.ctx.Done():
			flush()
			return
		case <-p.shipWake:
		}
		select {
		case <-p.ctx.Done():
		case <-time.After(shipDelay):
		}
		flush()
	}
}

// cgroupJob reads the Slurm job of a process from /proc/<pid>/cgroup
// under the root.
func (p *Plugin) cgroupJob(pid uint32) string {
	buf := make([]byte, 0, 4096)
	data, err := kernfs.ReadFileInto(p.fs.Path("proc", fmt.Sprint(pid), "cgroup"), buf)
	if err != nil {
		return ""
	}
	return parseJob(data)
}

// loadMounts re-reads mountinfo, replacing the table when it changed.
func (p *Plugin) loadMounts() {
	p.mountMu.Lock()
	defer p.mountMu.Unlock()
	data, err := kernfs.ReadFileInto(p.fs.Path("proc/self/mountinfo"), nil)
	if err != nil {
		if len(p.mounts.Load().raw) != 0 {
			p.log.Warn("mountinfo unreadable: I/O goes to mountpoint \"other\"", "err", err)
			p.mounts.Store(&mountTable{})
		}
		return
	}
	if cur := p.mounts.Load(); string(cur.raw) == string(data) {
		return
	}
	p.mounts.Store(&mountTable{raw: data, mounts: parseMountinfo(data)})
}

// housekeep re-reads mountinfo and keeps the socket there.
func (p *Plugin) housekeep() {
	defer p.wg.Done()
	t := time.NewTicker(time.Duration(p.cfg.Rescan))
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.loadMounts()
		p.listen()
	}
}

// fileIno is the inode of path, 0 if it cannot be had.
func fileIno(path string) uint64 {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	return inode(fi)
}
