// Command samplercost measures, side by side in one window, the CPU time
// the vigil node sampler spends per tick, what Debian's
// prometheus-node-exporter spends per scrape for the same collectors, and
// the read floor: bench/readfloor/readfloor.c, a C program that wakes at the
// same instants and makes only the syscalls the sampler's plugins make,
// without parsing.
//
//	go run ./bench/samplercost --vigil bin/vigil-sampler --duration 20s --runs 3
//
// node_exporter runs the collectors that match --plugins (cpu is its cpu
// and stat collectors, memory meminfo, load loadavg, the others the
// collector of the same name; self and procs have none).
//
// With --gofloor it also runs bench/gofloor as a Go read floor: the same
// calls made the way the sampler waits and reads, so that what Go's
// wake-up costs and what our parsing and sending cost can be told apart.
// With --upstream --veth the receiver sits behind a veth pair with threaded
// NAPI instead of loopback, so its TCP receive is not run inside the
// sampler's write; off loopback the stream needs a key, as --key gives it
// on loopback.
//
// CPU time comes from /proc/<pid>/task/*/schedstat (nanoseconds on CPU), so
// the figures are not limited to clock-tick resolution; wake-ups are the
// voluntary context switches of all threads.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bench/internal/benchutil"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/procs"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "receive" { // --veth's receiver, run by this tool
		if err := receive(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "samplercost receive:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.StringVar(&c.vigilBin, "vigil", "bin/vigil-sampler", "vigil sampler binary")
	flag.StringVar(&c.neBin, "node-exporter", "/usr/bin/prometheus-node-exporter", "node_exporter binary (empty to skip)")
	flag.StringVar(&c.floorSrc, "floor", "bench/readfloor/readfloor.c", "C source of the read floor, built with --cc (empty to skip)")
	flag.StringVar(&c.cc, "cc", "gcc", "C compiler for the read floor")
	flag.StringVar(&c.goFloorPkg, "gofloor", "", "also run the Go read floor: this package (./bench/gofloor) built with go build and run with the C floor's options (empty to skip)")
	flag.DurationVar(&c.duration, "duration", 30*time.Second, "measurement time per run")
	flag.DurationVar(&c.interval, "interval", 100*time.Millisecond, "sampling and scrape interval")
	flag.StringVar(&c.plugins, "plugins", "cpu,memory,vmstat,load,netdev,diskstats,filesystem,self", "vigil plugins")
	flag.StringVar(&c.root, "root", "/", "root of /proc and /sys for all three")
	flag.IntVar(&c.runs, "runs", 1, "runs; more than one also prints medians")
	flag.BoolVar(&c.upstream, "upstream", false, "also stream vigil's ticks over the wire to a receiver in this tool (which acknowledges and discards them)")
	flag.DurationVar(&c.ackInterval, "ack-interval", 0, "with --upstream, the receiver's acknowledgement interval (0: wire.DefaultAckInterval)")
	flag.BoolVar(&c.veth, "veth", false, "with --upstream, run the receiver in its own network namespace behind a veth pair with threaded NAPI, so that its TCP receive is not charged to the sampler as on loopback (root, ip, ethtool; implies --key)")
	flag.BoolVar(&c.keyed, "key", false, "with --upstream, stream with a shared key (every frame tagged), as a sampler must to an upstream on another host")
	flag.Parse()
	if err := c.run(); err != nil {
		fmt.Fprintln(os.Stderr, "samplercost:", err)
		os.Exit(1)
	}
}

type config struct {
	vigilBin, neBin, floorSrc, cc, plugins, root string
	goFloorPkg, goFloorBin                       string
	duration, interval, ackInterval              time.Duration
	runs                                         int
	upstream, veth, keyed                        bool
	keyFile                                      string
	vnet                                         *vethNet
	floorBin                                     string // built from floorSrc
}

// result is one process's figures over one window.
type result struct {
	perTick, wakeups float64 // CPU ns and voluntary switches per tick or scrape
}

func (c *config) run() error {
	dir, err := os.MkdirTemp("", "samplercost")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The floors are built into dir: CMD -o PATH SOURCE.
	build := func(src string, cmd ...string) (string, error) {
		base := filepath.Base(src)
		bin := filepath.Join(dir, strings.TrimSuffix(base, filepath.Ext(base)))
		if out, err := exec.Command(cmd[0], append(cmd[1:], "-o", bin, src)...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %w\n%s", src, err, out)
		}
		return bin, nil
	}
	if c.floorSrc != "" {
		if c.floorBin, err = build(c.floorSrc, c.cc, "-O2"); err != nil {
			return err
		}
	}
	if c.goFloorPkg != "" {
		if c.goFloorBin, err = build(c.goFloorPkg, "go", "build"); err != nil {
			return err
		}
	}
	if (c.veth || c.keyed) && !c.upstream {
		return errors.New("--veth and --key need --upstream")
	}
	if c.veth || c.keyed {
		// Peers off loopback must authenticate: the receiver refuses them
		// without a key.
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		c.keyFile = filepath.Join(dir, "key")
		if err := os.WriteFile(c.keyFile, []byte(hex.EncodeToString(key)), 0o600); err != nil {
			return err
		}
	}
	if c.veth {
		v, err := newVethNet()
		if err != nil {
			return err
		}
		defer v.close()
		c.vnet = v
		// An interrupted run removes its namespace too.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		go func() {
			if _, ok := <-sig; ok {
				v.close()
				os.Exit(130)
			}
		}()
	}
	all := map[string][]result{}
	var order []string
	for i := 1; i <= c.runs; i++ {
		fmt.Printf("## run %d of %d\n\n", i, c.runs)
		res, err := c.once()
		if err != nil {
			return err
		}
		for _, r := range res {
			if _, ok := all[r.name]; !ok {
				order = append(order, r.name)
			}
			all[r.name] = append(all[r.name], r.result)
		}
		fmt.Println()
	}
	if c.runs < 2 {
		return nil
	}
	fmt.Printf("## medians of %d runs\n\n| process | CPU per tick | %% of one core | wake-ups per tick |\n|---|---|---|---|\n", c.runs)
	med := map[string]float64{}
	for _, n := range order {
		var cpu, wk []float64
		for _, r := range all[n] {
			cpu = append(cpu, r.perTick)
			wk = append(wk, r.wakeups)
		}
		med[n] = median(cpu)
		fmt.Printf("| %s | %.1f µs | %.3f %% | %.2f |\n", n, med[n]/1e3, 100*med[n]/float64(c.interval), median(wk))
	}
	// Ratios of medians, and the median of the per-run ratios (same window).
	for _, peer := range []string{floorName, goFloorName, neName} {
		if _, ok := all[peer]; !ok {
			continue
		}
		var rs []float64
		for i := range all[vigilName] {
			rs = append(rs, all[vigilName][i].perTick/all[peer][i].perTick)
		}
		fmt.Printf("\nvigil / %s: median of per-run ratios %.3f (runs: %s)\n", peer, median(rs), fmtList(rs))
	}
	return nil
}

const (
	vigilName   = "vigil sampler"
	neName      = "prometheus-node-exporter"
	floorName   = "read floor (C)"
	goFloorName = "read floor (Go)"
)

type named struct {
	name string
	result
}

// once starts the processes, measures them over one window and prints a table.
func (c *config) once() ([]named, error) {
	root := strings.TrimSuffix(c.root, "/")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Each started process is waited for on the way out, after ctx has
	// killed it: on an error return too.
	stop := func(cmd *exec.Cmd) {
		cancel()
		_ = cmd.Wait()
	}
	vaddr, err := benchutil.FreeAddr()
	if err != nil {
		return nil, err
	}
	procs := []*proc{{name: vigilName, addr: vaddr, bin: c.vigilBin,
		args: []string{"--interval", c.interval.String(), "--plugins", c.plugins, "--root", c.root, "--listen", vaddr, "--log-level", "warn"}}}
	// received counts the ticks the receiver took, to catch a sampler
	// that measured cheap because it streamed nothing.
	received := new(atomic.Int64)
	switch {
	case c.vnet != nil:
		addr, cmd, err := c.vnet.startReceiver(ctx, c.ackInterval, c.keyFile, received)
		if err != nil {
			return nil, err
		}
		defer stop(cmd)
		procs[0].args = append(procs[0].args, "--upstream", addr, "--key", c.keyFile)
	case c.upstream:
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		opts := wire.ServerOptions{Log: slog.New(slog.DiscardHandler), AckInterval: c.ackInterval}
		if c.keyFile != "" {
			if opts.Key, err = wire.LoadKey(c.keyFile); err != nil {
				return nil, err
			}
			procs[0].args = append(procs[0].args, "--key", c.keyFile)
		}
		go func() { _ = wire.Serve(ctx, ln, opts, &countingSink{n: received}) }()
		procs[0].args = append(procs[0].args, "--upstream", ln.Addr().String())
	}
	if c.neBin != "" {
		naddr, err := benchutil.FreeAddr()
		if err != nil {
			return nil, err
		}
		procs = append(procs, &proc{name: neName, addr: naddr, bin: c.neBin, scraped: true,
			args: append(neCollectors(c.plugins), "--collector.disable-defaults",
				"--path.procfs="+root+"/proc", "--path.sysfs="+root+"/sys", "--path.rootfs="+c.root,
				"--web.listen-address="+naddr, "--log.level=warn")})
	}
	for _, p := range procs {
		if err := p.start(ctx); err != nil {
			return nil, err
		}
		defer stop(p.cmd)
	}
	// Both floors get the same calls to make: the mounts are the ones the
	// running sampler reports.
	for _, fl := range []struct{ name, bin string }{{floorName, c.floorBin}, {goFloorName, c.goFloorBin}} {
		if fl.bin == "" {
			continue
		}
		args, err := c.floorArgs(vaddr)
		if err != nil {
			return nil, err
		}
		p := &proc{name: fl.name, bin: fl.bin, args: args}
		if err := p.start(ctx); err != nil {
			return nil, err
		}
		defer stop(p.cmd)
		procs = append(procs, p)
	}
	time.Sleep(time.Second) // warm up
	for _, p := range procs {
		if p.c0, p.v0, err = taskStats(p.cmd.Process.Pid); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
	}
	// Both daemons and the floor are measured over the same window, so load
	// from elsewhere on the machine hits all of them alike.
	start := time.Now()
	t := time.NewTicker(c.interval)
	scrapes := 0
	for time.Since(start) < c.duration {
		<-t.C
		for _, p := range procs {
			if p.scraped {
				if _, err := get("http://" + p.addr + "/metrics"); err != nil {
					return nil, err
				}
			}
		}
		scrapes++
	}
	t.Stop()
	elapsed := time.Since(start)
	fmt.Printf("interval %s, %s window, all running at once\n\n", c.interval, elapsed.Round(time.Millisecond))
	fmt.Println("| process | values | ticks | CPU per tick | % of one core | wake-ups per tick | RSS |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var out []named
	for _, p := range procs {
		c1, v1, err := taskStats(p.cmd.Process.Pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		n := scrapes
		if !p.scraped {
			n = int(elapsed / c.interval) // its own ticks
		}
		n = max(n, 1)
		r := result{perTick: float64(c1-p.c0) / float64(n), wakeups: float64(v1-p.v0) / float64(n)}
		rss, _ := rss(p.cmd.Process.Pid)
		values := "-"
		if p.addr != "" {
			if b, err := get("http://" + p.addr + "/metrics"); err == nil {
				values = strconv.Itoa(countValues(b))
			}
		}
		fmt.Printf("| %s | %s | %d | %.1f µs | %.3f %% | %.2f | %.1f MiB |\n", p.name, values, n,
			r.perTick/1e3, 100*float64(c1-p.c0)/float64(elapsed), r.wakeups, float64(rss)/(1<<20))
		out = append(out, named{p.name, r})
	}
	fmt.Println()
	for _, o := range out[1:] {
		fmt.Printf("vigil CPU per tick / %s = %.3f\n", o.name, out[0].perTick/o.perTick)
	}
	if c.upstream {
		n := received.Load()
		fmt.Printf("ticks received upstream: %d\n", n)
		if n == 0 {
			return nil, errors.New("the sampler streamed no tick upstream (its log above says why)")
		}
	}
	return out, nil
}

// countingSink discards what it is sent and counts the ticks.
type countingSink struct {
	wire.Discard
	n *atomic.Int64
}

func (s *countingSink) Tick(string, time.Time, []*metric.Desc, []float64) { s.n.Add(1) }

// neCollectors maps vigil plugins to node_exporter's collectors (self and
// procs have none).
func neCollectors(plugins string) []string {
	names := map[string][]string{"cpu": {"cpu", "stat"}, "memory": {"meminfo"}, "load": {"loadavg"}, "os": {"os"},
		"vmstat": {"vmstat"}, "netdev": {"netdev"}, "diskstats": {"diskstats"}, "filesystem": {"filesystem"},
		"pressure": {"pressure"}, "netstat": {"netstat"}, "sockstat": {"sockstat"}, "softnet": {"softnet"},
		"filefd": {"filefd"}, "entropy": {"entropy"}, "netclass": {"netclass"}, "uname": {"uname"},
		"time": {"time"}, "timex": {"timex"}, "conntrack": {"conntrack"}, "edac": {"edac"},
		"thermal_zone": {"thermal_zone"}, "cpufreq": {"cpufreq"}, "hwmon": {"hwmon"}, "processes": {"processes"}, "nfs": {"nfs"}, "mdadm": {"mdadm"},
		"textfile": {"textfile"}, "meminfo_numa": {"meminfo_numa"}, "schedstat": {"schedstat"}, "nvme": {"nvme"},
		"arp": {"arp"}, "udp_queues": {"udp_queues"}, "dmi": {"dmi"}, "powersupplyclass": {"powersupplyclass"},
		"nfsd": {"nfsd"}, "bonding": {"bonding"}, "xfs": {"xfs"}, "zfs": {"zfs"}, "fibrechannel": {"fibrechannel"},
		"tapestats": {"tapestats"}, "selinux": {"selinux"}, "bcache": {"bcache"}, "btrfs": {"btrfs"}, "ipvs": {"ipvs"}}
	var args []string
	for _, p := range strings.Split(plugins, ",") {
		for _, c := range names[strings.TrimSpace(p)] {
			args = append(args, "--collector."+c)
		}
	}
	return args
}

// floorArgs lists what the sampler's plugins read each tick on this
// machine. The mounts are the ones the running sampler reports.
func (c *config) floorArgs(vigilAddr string) ([]string, error) {
	root := strings.TrimSuffix(c.root, "/")
	args := []string{"-i", strconv.FormatInt(int64(c.interval), 10)}
	for _, p := range strings.Split(c.plugins, ",") {
		switch p = strings.TrimSpace(p); p {
		case "cpu":
			args = append(args, "-r", root+"/proc/stat")
		case "memory":
			args = append(args, "-r", root+"/proc/meminfo")
		case "vmstat":
			args = append(args, "-r", root+"/proc/vmstat")
		case "load":
			args = append(args, "-r", root+"/proc/loadavg")
		case "netdev":
			if root == "" {
				// The live system: the plugin's one netlink dump a tick.
				args = append(args, "-l")
			} else {
				// Another root: the file, and each interface's sysfs
				// rx_nohandler (left out: the floor is then a little low).
				args = append(args, "-r", root+"/proc/net/dev")
			}
		case "diskstats":
			args = append(args, "-r", root+"/proc/diskstats")
		case "self":
			// The floor's own statm and rusage, as the plugin reads the sampler's.
			args = append(args, "-r", "/proc/self/statm", "-u")
		case "filesystem":
			// Mount table polled every tick and re-read every mount_refresh
			// (10s by default); one statfs per reported mount.
			mi := root + "/proc/1/mountinfo"
			if f, err := os.Open(mi); err != nil {
				mi = root + "/proc/self/mountinfo"
			} else {
				f.Close()
			}
			args = append(args, "-p", mi, "-k", strconv.FormatInt(int64(10*time.Second/c.interval), 10))
			mps, err := mountpoints(vigilAddr)
			if err != nil {
				return nil, err
			}
			for _, mp := range mps {
				args = append(args, "-s", root+mp)
			}
		case "procs":
			// The plugin's listing and one stat read per process, at most once
			// every procs.MinInterval; status, io and cgroup of the top
			// processes left out, so the floor is a little low.
			every := max(1, int64((procs.MinInterval+c.interval-1)/c.interval))
			args = append(args, "-P", root+"/proc", "-Q", strconv.FormatInt(every, 10))
		case "pressure":
			for _, r := range []string{"cpu", "io", "memory", "irq"} {
				if _, err := os.Stat(root + "/proc/pressure/" + r); err == nil {
					args = append(args, "-r", root+"/proc/pressure/"+r)
				}
			}
		case "netstat":
			args = append(args, "-r", root+"/proc/net/netstat", "-r", root+"/proc/net/snmp", "-r", root+"/proc/net/snmp6")
		case "sockstat":
			args = append(args, "-r", root+"/proc/net/sockstat", "-r", root+"/proc/net/sockstat6")
		case "softnet":
			args = append(args, "-r", root+"/proc/net/softnet_stat")
		case "filefd":
			args = append(args, "-r", root+"/proc/sys/fs/file-nr")
		case "entropy":
			args = append(args, "-r", root+"/proc/sys/kernel/random/entropy_avail", "-r", root+"/proc/sys/kernel/random/poolsize")
		case "time":
			cs := root + "/sys/devices/system/clocksource/clocksource0/"
			args = append(args, "-r", cs+"available_clocksource", "-r", cs+"current_clocksource")
		case "uname":
			args = append(args, "-n")
		case "timex":
			args = append(args, "-a")
		case "nfs", "mdadm", "nfsd", "schedstat":
			f := map[string]string{"nfs": "/proc/net/rpc/nfs", "mdadm": "/proc/mdstat", "nfsd": "/proc/net/rpc/nfsd", "schedstat": "/proc/schedstat"}[p]
			if _, err := os.Stat(root + f); err == nil {
				args = append(args, "-r", root+f)
			}
		case "arp":
			args = append(args, "-r", root+"/proc/net/arp")
		case "udp_queues":
			args = append(args, "-r", root+"/proc/net/udp", "-r", root+"/proc/net/udp6")
		case "meminfo_numa":
			nodes, _ := filepath.Glob(root + "/sys/devices/system/node/node[0-9]*")
			for _, n := range nodes {
				args = append(args, "-r", n+"/meminfo", "-r", n+"/numastat")
			}
		case "conntrack":
			for _, f := range []string{"/proc/sys/net/netfilter/nf_conntrack_count", "/proc/sys/net/netfilter/nf_conntrack_max", "/proc/net/stat/nf_conntrack"} {
				if _, err := os.Stat(root + f); err == nil {
					args = append(args, "-r", root+f)
				}
			}
		case "netclass", "os", "thermal_zone", "cpufreq", "hwmon", "processes", "edac",
			"textfile", "watchdog", "nvme", "dmi", "powersupplyclass", "fibrechannel", "tapestats",
			"bonding", "xfs", "zfs", "bcache", "btrfs", "selinux", "ipvs":
			// Every 10 s (os: its file every 64 ticks; edac, watchdog, nvme,
			// fibrechannel, tapestats, powersupplyclass: only with such
			// devices; bonding, xfs, zfs, bcache, btrfs, ipvs: looked for every 64 ticks; dmi and
			// selinux: read at start-up; textfile: a directory listing and a
			// stat per file): left out of the floor, which is then a little low.
		case "appio", "health", "jobs", "infiniband", "lustre", "power":
			// appio listens on its socket; health runs its checks on their own
			// schedule; jobs, infiniband, lustre and power read only where there
			// is a scheduler or such hardware: left out (the floor is a lower bound).
		default:
			return nil, fmt.Errorf("the read floor has no model of plugin %q (run with --floor '')", p)
		}
	}
	return args, nil
}

// mountpoints returns the mount points the sampler reports, waiting for
// its first filesystem samples.
func mountpoints(addr string) ([]string, error) {
	const metric = "node_filesystem_device_error{"
	for range 50 {
		body, err := get("http://" + addr + "/metrics")
		if err != nil {
			return nil, err
		}
		var mps []string
		for _, l := range strings.Split(body, "\n") {
			if !strings.HasPrefix(l, metric) {
				continue
			}
			_, rest, ok := strings.Cut(l, `mountpoint="`)
			mp, _, ok2 := strings.Cut(rest, `"`)
			if ok && ok2 && !slices.Contains(mps, mp) {
				mps = append(mps, mp)
			}
		}
		if len(mps) > 0 {
			return mps, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, errors.New("the sampler reports no file systems")
}

type proc struct {
	name, addr, bin string
	args            []string
	scraped         bool
	cmd             *exec.Cmd
	c0, v0          int64
}

func (p *proc) start(ctx context.Context) error {
	p.cmd = exec.CommandContext(ctx, p.bin, p.args...)
	p.cmd.Stderr = os.Stderr
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.bin, err)
	}
	if p.addr == "" {
		return nil
	}
	for range 100 {
		if b, err := get("http://" + p.addr + "/metrics"); err == nil && len(b) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: no /metrics at %s", p.name, p.addr)
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// countValues counts samples excluding the exporters' own Go runtime metrics.
func countValues(body string) int {
	n := 0
	for _, l := range strings.Split(body, "\n") {
		if l == "" || l[0] == '#' || strings.HasPrefix(l, "go_") || strings.HasPrefix(l, "process_") ||
			strings.HasPrefix(l, "promhttp_") || strings.HasPrefix(l, "node_scrape_") || strings.HasPrefix(l, "vigil_") {
			continue
		}
		n++
	}
	return n
}

// taskStats sums CPU nanoseconds (schedstat) and voluntary context
// switches over all threads of pid.
func taskStats(pid int) (cpu, voluntary int64, err error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			cpu += v
		}
		b, err = os.ReadFile(filepath.Join(dir, e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				voluntary += n
			}
		}
	}
	return cpu, voluntary, nil
}

func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtList(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.FormatFloat(x, 'f', 3, 64))
	}
	return strings.Join(parts, ", ")
}
