// Package simulate runs virtual samplers: many nodes in one process,
// producing realistic, varying data with the series of the real plugins,
// streamed upstream over the wire protocol (`vigil simulate`).
package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	jobsplugin "github.com/vigil-hpc/vigil/internal/sampler/plugins/jobs"
)

// How one series moves from tick to tick. State is an integer (jiffies,
// bytes, milliseconds) converted by scale for the value, as the plugins do.
type kind uint8

const (
	kConst    kind = iota // fixed for the node (totals, boot time)
	kCounter              // steady rate with noise
	kSporadic             // increments now and then (errors, major faults)
	kGauge                // mean-reverting random walk in steps of quant
	kRare                 // gauge that changes now and then
)

type spec struct {
	desc  *metric.Desc
	kind  kind
	scale float64 // value = state * (1/scale) (1 for integers)
	base  float64 // typical magnitude of the state
	rate  float64 // counter: mean increase per second; gauge: step spread
	quant int64   // gauge step quantum (a page for memory)
	prob  float64 // sporadic/rare: chance of a change per second
}

// Schema is the series set shared by all virtual nodes of one shape
// (descriptors are shared, as each real node's are stable).
type Schema struct {
	cpus  int
	cpu   [][]*metric.Desc // [cpu][mode]
	load  [3]*metric.Desc
	specs []spec
	// Specs a job moves (indexes in specs): node memory and the
	// InfiniBand counters its parallel file system I/O goes through.
	memFree, memAvail, anon, activeAnon, ibRx, ibTx int
	jobsNode                                        [6]*metric.Desc // the jobs plugin's node series
	health                                          *healthDescs    // the health plugin's, with SetFaults
	rapl                                            *raplDescs      // the power plugin's
}

var cpuModes = [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}

const (
	mUser = iota
	mNice
	mSystem
	mIdle
	mIowait
	mIrq
	mSoftirq
	mSteal
)

// NewSchema builds the series of a node with cpus cores: per-core CPU
// modes, load, stat counters, memory, vmstat, two NICs and loopback, two
// disks and four file systems; with 16 cores about 300 values.
func NewSchema(cpus int) *Schema {
	s := &Schema{cpus: cpus}
	for c := range cpus {
		row := make([]*metric.Desc, len(cpuModes))
		for m, mode := range cpuModes {
			row[m] = metric.NewDesc("node_cpu_seconds_total", "Seconds the CPUs spent in each mode.",
				metric.Counter, "cpu", strconv.Itoa(c), "mode", mode)
		}
		s.cpu = append(s.cpu, row)
	}
	s.load = [3]*metric.Desc{
		metric.NewDesc("node_load1", "1m load average.", metric.Gauge),
		metric.NewDesc("node_load5", "5m load average.", metric.Gauge),
		metric.NewDesc("node_load15", "15m load average.", metric.Gauge),
	}
	add := func(sp spec) { s.specs = append(s.specs, sp) }
	gauge := func(name, help string, base, step float64, quant int64) {
		add(spec{desc: metric.NewDesc(name, help, metric.Gauge), kind: kGauge, scale: 1, base: base, rate: step, quant: quant})
	}
	constant := func(name, help string, base float64) {
		add(spec{desc: metric.NewDesc(name, help, metric.Gauge), kind: kConst, scale: 1, base: base})
	}
	rare := func(name, help string, base, step float64, quant int64, prob float64) {
		add(spec{desc: metric.NewDesc(name, help, metric.Gauge), kind: kRare, scale: 1, base: base, rate: step, quant: quant, prob: prob})
	}

	// /proc/stat
	constant("node_boot_time_seconds", "Node boot time, in unixtime.", 1.76e9)
	add(spec{desc: metric.NewDesc("node_context_switches_total", "Total number of context switches.", metric.Counter), kind: kCounter, scale: 1, base: 4e9, rate: 4e4})
	add(spec{desc: metric.NewDesc("node_forks_total", "Total number of forks.", metric.Counter), kind: kCounter, scale: 1, base: 3e6, rate: 20})
	add(spec{desc: metric.NewDesc("node_intr_total", "Total number of interrupts serviced.", metric.Counter), kind: kCounter, scale: 1, base: 9e9, rate: 6e4})
	rare("node_procs_running", "Number of processes in runnable state.", 17, 2, 1, 0.5)
	rare("node_procs_blocked", "Number of processes blocked waiting for I/O to complete.", 0, 1, 1, 0.05)

	// /proc/meminfo, bytes in pages
	const page = 4096
	const gib = 1 << 30
	memConst := []struct {
		n string
		v float64
	}{{"MemTotal", 256 * gib}, {"SwapTotal", 0}, {"SwapFree", 0}, {"SwapCached", 0},
		{"CommitLimit", 128 * gib}, {"VmallocTotal", 32 * 1024 * gib}, {"HugePages_Total", 0},
		{"HugePages_Free", 0}, {"Hugepagesize", 2 << 20}, {"Unevictable", 12 << 20}, {"Mlocked", 12 << 20},
		{"Bounce", 0}, {"NFS_Unstable", 0}, {"HardwareCorrupted", 0}}
	for _, m := range memConst {
		constant("node_memory_"+m.n+"_bytes", "Memory information field "+m.n+"_bytes.", m.v)
	}
	memVar := []struct {
		n          string
		v, step    float64
		rarelyProb float64
	}{{"MemFree", 180 * gib, 2e6, 0}, {"MemAvailable", 230 * gib, 2e6, 0}, {"Buffers", 800 << 20, 4e4, 0.2},
		{"Cached", 40 * gib, 1e6, 0}, {"Active", 30 * gib, 5e5, 0}, {"Inactive", 20 * gib, 5e5, 0},
		{"Active_anon", 12 * gib, 5e5, 0}, {"Inactive_anon", 1 * gib, 1e5, 0.3}, {"Active_file", 18 * gib, 2e5, 0},
		{"Inactive_file", 19 * gib, 2e5, 0}, {"Dirty", 40 << 20, 5e5, 0}, {"Writeback", 0, 1e5, 0.02},
		{"AnonPages", 13 * gib, 5e5, 0}, {"Mapped", 2 * gib, 5e4, 0.3}, {"Shmem", 900 << 20, 2e4, 0.1},
		{"KReclaimable", 3 * gib, 5e4, 0.3}, {"Slab", 5 * gib, 5e4, 0}, {"SReclaimable", 3 * gib, 5e4, 0.3},
		{"SUnreclaim", 2 * gib, 3e4, 0.3}, {"KernelStack", 40 << 20, 3e4, 0.2}, {"PageTables", 150 << 20, 2e4, 0.3},
		{"Committed_AS", 30 * gib, 1e6, 0}, {"VmallocUsed", 300 << 20, 1e4, 0.05}, {"Percpu", 60 << 20, 0, 0},
		{"AnonHugePages", 6 * gib, 2 << 20, 0.1}}
	for _, m := range memVar {
		name, help := "node_memory_"+m.n+"_bytes", "Memory information field "+m.n+"_bytes."
		switch {
		case m.step == 0:
			constant(name, help, m.v)
		case m.rarelyProb > 0:
			rare(name, help, m.v, m.step, page, m.rarelyProb)
		default:
			gauge(name, help, m.v, m.step, page)
		}
	}
	constant("node_memory_HugePages_Rsvd", "Memory information field HugePages_Rsvd.", 0)

	// /proc/vmstat (untyped, as node_exporter exposes it)
	vm := func(name string, k kind, base, rate, prob float64) {
		add(spec{desc: metric.NewDesc("node_vmstat_"+name, "/proc/vmstat information field "+name+".", metric.Untyped),
			kind: k, scale: 1, base: base, rate: rate, quant: 1, prob: prob})
	}
	for _, v := range []struct {
		n       string
		k       kind
		b, r, p float64
	}{
		{"nr_free_pages", kGauge, 4.5e7, 500, 0}, {"nr_zone_inactive_anon", kRare, 2.6e5, 30, 0.3},
		{"nr_zone_active_anon", kGauge, 3e6, 100, 0}, {"nr_zone_inactive_file", kGauge, 4.6e6, 50, 0},
		{"nr_zone_active_file", kGauge, 4.4e6, 50, 0}, {"nr_zone_unevictable", kConst, 3000, 0, 0},
		{"nr_zone_write_pending", kGauge, 1e4, 100, 0}, {"nr_mlock", kConst, 3000, 0, 0},
		{"nr_bounce", kConst, 0, 0, 0}, {"nr_dirty", kGauge, 1e4, 100, 0}, {"nr_writeback", kRare, 0, 20, 0.02},
		{"nr_shmem", kRare, 2.2e5, 5, 0.1}, {"nr_anon_pages", kGauge, 3.2e6, 100, 0},
		{"nr_mapped", kRare, 5e5, 10, 0.3}, {"nr_file_pages", kGauge, 1e7, 200, 0},
		{"pgpgin", kCounter, 9e8, 2000, 0}, {"pgpgout", kCounter, 3e9, 8000, 0},
		{"pswpin", kConst, 0, 0, 0}, {"pswpout", kConst, 0, 0, 0},
		{"pgalloc_dma", kConst, 0, 0, 0}, {"pgalloc_dma32", kSporadic, 1e6, 3, 0.05},
		{"pgalloc_normal", kCounter, 5e10, 6e4, 0}, {"pgalloc_movable", kConst, 0, 0, 0},
		{"pgfree", kCounter, 5.1e10, 6e4, 0}, {"pgactivate", kCounter, 4e8, 300, 0},
		{"pgdeactivate", kSporadic, 1e6, 50, 0.05}, {"pgfault", kCounter, 8e10, 5e4, 0},
		{"pgmajfault", kSporadic, 2e5, 2, 0.1}, {"pglazyfreed", kConst, 0, 0, 0},
		{"pgrefill", kSporadic, 1e6, 100, 0.03}, {"pgsteal_kswapd", kSporadic, 3e6, 500, 0.02},
		{"pgsteal_direct", kConst, 0, 0, 0}, {"pgscan_kswapd", kSporadic, 3e6, 600, 0.02},
		{"pgscan_direct", kConst, 0, 0, 0}, {"oom_kill", kConst, 0, 0, 0},
		{"numa_hit", kCounter, 5e10, 5e4, 0}, {"numa_miss", kSporadic, 1e5, 20, 0.05},
		{"numa_foreign", kSporadic, 1e5, 20, 0.05}, {"numa_local", kCounter, 5e10, 5e4, 0},
		{"numa_other", kSporadic, 3e5, 10, 0.1}, {"thp_fault_alloc", kSporadic, 2e5, 3, 0.1},
		{"thp_collapse_alloc", kSporadic, 1e4, 1, 0.01}, {"compact_stall", kConst, 12, 0, 0},
		{"workingset_refault_file", kSporadic, 1e5, 10, 0.05},
	} {
		vm(v.n, v.k, v.b, v.r, v.p)
	}

	// /proc/net/dev: two NICs and loopback, all sixteen columns
	for _, dev := range []struct {
		name  string
		bytes float64 // receive bytes per second
	}{{"eno1", 2e5}, {"ib0", 4e7}, {"lo", 3e4}} {
		for _, dir := range []string{"receive", "transmit"} {
			for _, col := range []string{"bytes", "packets", "errs", "drop", "fifo", "frame_or_colls", "compressed", "multicast_or_carrier"} {
				c := col
				switch {
				case col == "frame_or_colls" && dir == "receive":
					c = "frame"
				case col == "frame_or_colls":
					c = "colls"
				case col == "multicast_or_carrier" && dir == "receive":
					c = "multicast"
				case col == "multicast_or_carrier":
					c = "carrier"
				}
				sp := spec{desc: metric.NewDesc("node_network_"+dir+"_"+c+"_total", "Network device statistic "+dir+"_"+c+".",
					metric.Counter, "device", dev.name), scale: 1, quant: 1}
				switch c {
				case "bytes":
					sp.kind, sp.base, sp.rate = kCounter, dev.bytes*1e5, dev.bytes
				case "packets":
					sp.kind, sp.base, sp.rate = kCounter, dev.bytes*1e5/900, dev.bytes/900
				case "drop", "multicast":
					sp.kind, sp.base, sp.rate, sp.prob = kSporadic, 1e3, 1, 0.02
				default:
					sp.kind = kConst
				}
				add(sp)
			}
		}
	}

	// /proc/diskstats: two disks
	for _, dev := range []string{"nvme0n1", "sda"} {
		d := func(name string, k kind, scale, base, rate, prob float64) {
			add(spec{desc: metric.NewDesc("node_disk_"+name, "Disk statistic "+name+".", metric.Counter, "device", dev),
				kind: k, scale: scale, base: base, rate: rate, quant: 1, prob: prob})
		}
		d("reads_completed_total", kSporadic, 1, 2e6, 40, 0.3)
		d("reads_merged_total", kSporadic, 1, 1e5, 5, 0.1)
		d("read_bytes_total", kSporadic, 1, 8e10, 4e5, 0.3)
		d("read_time_seconds_total", kSporadic, 1000, 4e6, 30, 0.3)
		d("writes_completed_total", kCounter, 1, 9e6, 30, 0)
		d("writes_merged_total", kSporadic, 1, 4e6, 20, 0.5)
		d("written_bytes_total", kCounter, 1, 3e11, 3e5, 0)
		d("write_time_seconds_total", kCounter, 1000, 2e7, 40, 0)
		add(spec{desc: metric.NewDesc("node_disk_io_now", "The number of I/Os currently in progress.", metric.Gauge, "device", dev),
			kind: kRare, scale: 1, base: 0, rate: 1, quant: 1, prob: 0.1})
		d("io_time_seconds_total", kCounter, 1000, 3e7, 30, 0)
		d("io_time_weighted_seconds_total", kCounter, 1000, 5e7, 60, 0)
	}

	// statfs of four mounts
	for _, fs := range []struct{ dev, fstype, mnt string }{
		{"/dev/nvme0n1p2", "xfs", "/"}, {"/dev/nvme0n1p1", "vfat", "/boot/efi"},
		{"tmpfs", "tmpfs", "/dev/shm"}, {"/dev/sda1", "xfs", "/scratch"},
	} {
		f := func(name, help string, k kind, base, step float64, quant int64, prob float64) {
			add(spec{desc: metric.NewDesc("node_filesystem_"+name, help, metric.Gauge,
				"device", fs.dev, "fstype", fs.fstype, "mountpoint", fs.mnt),
				kind: k, scale: 1, base: base, rate: step, quant: quant, prob: prob})
		}
		f("size_bytes", "Filesystem size in bytes.", kConst, 4e11, 0, 0, 0)
		f("free_bytes", "Filesystem free space in bytes.", kRare, 2e11, 10, 4096, 0.3)
		f("avail_bytes", "Filesystem space available to non-root users in bytes.", kRare, 1.9e11, 10, 4096, 0.3)
		f("files", "Filesystem total file nodes.", kConst, 2e8, 0, 0, 0)
		f("files_free", "Filesystem total free file nodes.", kRare, 1.9e8, 3, 1, 0.2)
	}
	find := func(name, dev string) int {
		for i, sp := range s.specs {
			if sp.desc.Name == name && (dev == "" || sp.desc.Labels[0].Value == dev) {
				return i
			}
		}
		panic("simulate: no spec " + name)
	}
	s.memFree, s.memAvail = find("node_memory_MemFree_bytes", ""), find("node_memory_MemAvailable_bytes", "")
	s.anon, s.activeAnon = find("node_memory_AnonPages_bytes", ""), find("node_memory_Active_anon_bytes", "")
	s.ibRx, s.ibTx = find("node_network_receive_bytes_total", "ib0"), find("node_network_transmit_bytes_total", "ib0")
	s.jobsNode = jobsplugin.NodeDescs()
	s.health = newHealthDescs()
	s.rapl = newRaplDescs()
	return s
}

// Len is the number of values per tick of a node built on s.
func (s *Schema) Len() int { return s.cpus*len(cpuModes) + len(s.load) + len(s.specs) + 2*topProcs + 3 }

// Node is one virtual sampler.
type Node struct {
	Name    string
	sch     *Schema
	rng     *rand.Rand
	state   []int64   // by spec
	rate    []float64 // by spec: the node's own mean rate
	cpu     [][len(cpuModes)]int64
	busy    []float64 // per core, 0..1
	load    [3]float64
	procs   [topProcs]proc
	nextPID int

	// With a scheduler: the job on the node (nil: idle), the one that
	// just left (its running 0 is sent once), and the job's counters.
	sched        *Scheduler
	sidx         int
	job, gone    *run
	jUser, jSys  int64 // USER_HZ ticks
	jRead, jWrit float64
	jPeak, jHits float64
	jEnded       int // jobs ended on the node

	health *nodeHealth // with SetFaults: the health plugin's checks
	energy rapl        // RAPL counters, driven by the busy cores
}

const topProcs = 5

type proc struct {
	cpu, rss *metric.Desc
	jiffies  int64
	share    float64 // of one core
	rssBytes int64
	job      *run // the job it belongs to, if any
}

var comms = [...]string{"lmp", "gmx_mpi", "python3", "vasp_std", "slurmstepd", "orted", "java", "namd2"}

// NewNode returns a node of schema s whose randomness derives from seed.
func NewNode(name string, s *Schema, seed uint64) *Node {
	n := &Node{Name: name, sch: s, rng: rand.New(rand.NewPCG(seed, 0x5eed)), nextPID: 1000}
	n.state = make([]int64, len(s.specs))
	n.rate = make([]float64, len(s.specs))
	for i, sp := range s.specs {
		f := 0.5 + n.rng.Float64() // nodes differ
		switch {
		case sp.kind == kConst:
			f = 1 // hardware and configuration are the same across the cluster
		case strings.HasPrefix(sp.desc.Name, "node_memory_"):
			f = 0.6 + 0.5*n.rng.Float64() // keeps free and available below MemTotal
		}
		n.state[i] = int64(sp.base * f)
		if sp.quant > 1 {
			n.state[i] -= n.state[i] % sp.quant
		}
		n.rate[i] = sp.rate * f
	}
	n.cpu = make([][len(cpuModes)]int64, s.cpus)
	n.busy = make([]float64, s.cpus)
	jobBusy := n.rng.Float64() < 0.7 // most nodes of a cluster run a job
	for c := range n.cpu {
		n.cpu[c][mIdle] = 4e7 + n.rng.Int64N(1e6)
		n.cpu[c][mUser] = 3e7 + n.rng.Int64N(1e6)
		n.cpu[c][mSystem] = 1e6 + n.rng.Int64N(1e5)
		n.cpu[c][mIowait] = 1e4 + n.rng.Int64N(1e3)
		n.cpu[c][mIrq] = 100
		n.cpu[c][mSoftirq] = 2e4 + n.rng.Int64N(1e3)
		if jobBusy {
			n.busy[c] = 0.97
		} else {
			n.busy[c] = 0.01
		}
	}
	for i := range n.procs {
		n.newProc(i)
	}
	return n
}

func (n *Node) newProc(i int) {
	n.nextPID += 1 + n.rng.IntN(50)
	pid, comm := strconv.Itoa(n.nextPID), comms[n.rng.IntN(len(comms))]
	user := fmt.Sprintf("user%03d", n.rng.IntN(200))
	n.procs[i] = proc{
		cpu: metric.NewDesc("vigil_process_cpu_seconds_total", "CPU time of a top process.", metric.Counter,
			"pid", pid, "user", user, "command", comm),
		rss: metric.NewDesc("vigil_process_resident_memory_bytes", "Resident memory of a top process.", metric.Gauge,
			"pid", pid, "user", user, "command", comm),
		share:    n.rng.Float64(),
		rssBytes: (1 + n.rng.Int64N(4000)) << 20,
	}
}

// newJobProc makes top process i one of job r's ranks, labelled with the
// job as the procs plugin labels a process in a job's cgroup.
func (n *Node) newJobProc(i int, r *run, busy float64, rss int64) {
	n.nextPID += 1 + n.rng.IntN(50)
	l := []string{"pid", strconv.Itoa(n.nextPID), "user", r.user, "command", r.comm, "jobid", r.id}
	n.procs[i] = proc{
		cpu:      metric.NewDesc("vigil_process_cpu_seconds_total", "CPU time of a top process.", metric.Counter, l...),
		rss:      metric.NewDesc("vigil_process_resident_memory_bytes", "Resident memory of a top process.", metric.Gauge, l...),
		share:    busy,
		rssBytes: max(rss, 4096),
		job:      r,
	}
}

// Sample appends one tick of the node to b (after b.Reset), dt after the
// previous one.
func (n *Node) Sample(t time.Time, dt time.Duration, b *metric.Batch) {
	sec := dt.Seconds()
	rng := n.rng
	// CPU: each core's USER_HZ ticks split among modes by its busy share; a
	// job starts or ends now and then.
	jiffies := int64(math.Round(100 * sec))
	var job *run
	var step int64
	if n.sched != nil {
		job, step = n.jobAt(t)
	}
	running := 0.0
	var ju, js int64
	for c := range n.cpu {
		if n.sched == nil && rng.Float64() < 0.002*sec {
			if n.busy[c] > 0.5 {
				n.busy[c] = 0.01
			} else {
				n.busy[c] = 0.97
			}
		}
		running += n.busy[c]
		row := &n.cpu[c]
		busy := n.busy[c] * float64(jiffies)
		user := int64(busy*0.95 + rng.NormFloat64()*0.7)
		sys := int64(busy*0.04 + rng.Float64()*1.2)
		var iow, irq, soft int64
		if rng.Float64() < 0.05 {
			iow = 1
		}
		if rng.Float64() < 0.1 {
			soft = 1
		}
		if rng.Float64() < 0.005 {
			irq = 1
		}
		user, sys = max(user, 0), max(sys, 0)
		ju += user
		js += sys
		idle := max(jiffies-user-sys-iow-irq-soft, 0)
		row[mUser] += user
		row[mSystem] += sys
		row[mIdle] += idle
		row[mIowait] += iow
		row[mIrq] += irq
		row[mSoftirq] += soft
		for m, d := range n.sch.cpu[c] {
			b.Add(d, float64(row[m])/100)
		}
	}
	// Load averages as the kernel prints them: two decimals.
	for i, tau := range [3]float64{60, 300, 900} {
		a := math.Exp(-sec / tau)
		n.load[i] = n.load[i]*a + running*(1-a)
		b.Add(n.sch.load[i], math.Round(n.load[i]*100)/100)
	}
	var used float64
	if job != nil {
		// The job's processes are the node's busy CPU time.
		n.jUser += ju
		n.jSys += js
		used = n.jobIO(job, step, sec)
	}
	base := len(b.Values)
	for i := range n.sch.specs {
		sp := &n.sch.specs[i]
		n.state[i] = n.step(sp, n.state[i], n.rate[i], sec)
		v := float64(n.state[i])
		if sp.scale != 1 {
			v *= 1 / sp.scale // as the diskstats plugin and node_exporter: ms * (1/1000)
		}
		b.Add(sp.desc, v)
	}
	if job != nil {
		vals, floor := b.Values[base:], float64(gib)
		vals[n.sch.memFree] = max(vals[n.sch.memFree]-used, floor)
		vals[n.sch.memAvail] = max(vals[n.sch.memAvail]-used, floor)
		vals[n.sch.anon] += used
		vals[n.sch.activeAnon] += used
	}
	// Top processes: one is replaced now and then (new series, new schema).
	if rng.Float64() < 0.01*sec {
		if i := rng.IntN(topProcs); n.procs[i].job == nil { // a job's ranks stay
			n.newProc(i)
		}
	}
	for i := range n.procs {
		p := &n.procs[i]
		p.jiffies += int64(p.share * float64(jiffies))
		if rng.Float64() < 0.2*sec {
			p.rssBytes += (rng.Int64N(64) - 30) * 4096
			p.rssBytes = max(p.rssBytes, 4096)
		}
		b.Add(p.cpu, float64(p.jiffies)/100)
		b.Add(p.rss, float64(p.rssBytes))
	}
	n.energy.step(n.sch.rapl, running/float64(max(n.sch.cpus, 1)), dt, b)
	if n.sched != nil {
		n.jobSeries(job, step, used, b)
	}
	if n.health != nil {
		n.healthSeries(t, b)
	}
}

func (n *Node) step(sp *spec, v int64, rate, sec float64) int64 {
	rng := n.rng
	switch sp.kind {
	case kCounter:
		// Rates wander: log-normal noise around the node's mean.
		inc := rate * sec * math.Exp(rng.NormFloat64()*0.3)
		return v + int64(inc)
	case kSporadic:
		if rng.Float64() < sp.prob*sec {
			return v + 1 + rng.Int64N(int64(rate)+1)
		}
		return v
	case kGauge, kRare:
		if sp.kind == kRare && rng.Float64() >= sp.prob*sec {
			return v
		}
		q := max(sp.quant, 1)
		stepv := rng.NormFloat64() * rate * math.Sqrt(sec)
		// Pull back towards the base so gauges stay plausible.
		stepv += (sp.base - float64(v)) * 0.01 * sec
		v += int64(stepv) / q * q
		return max(v, 0)
	}
	return v
}

// NodeName is the name of virtual node i (counting from 1): cn00001.
func NodeName(i int) string { return fmt.Sprintf("cn%05d", i) }
