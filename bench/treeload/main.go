// Command treeload measures how many nodes one aggregator forwards without
// loss: it starts `vigil aggregator` (one level, or two: L1 -> L2), an
// in-process top that records when every tick arrives, and `vigil simulate
// --nodes N` streaming into L1.
//
//	go run ./bench/treeload --nodes 20000 --duration 30s [--levels 1|2]
//
// It reports values per second sent and received at the top, ticks lost,
// each aggregator's CPU (from /proc/PID/schedstat, all threads) and RSS,
// the median and 99th percentile of arrival at the top minus the sample
// timestamp, and wire bytes per value into L1. The simulator runs on the
// same machine and its CPU is reported too: on a small machine it competes
// with the aggregator.
//
// Latency is broken down by hop: how late the simulator had each tick
// ready (built, encoded and due: it builds them ahead) and wrote it, and
// how long a group's build took (from its log), each aggregator's lag at
// arrival and once
// written upstream (its vigil_aggregator_tick_lag_seconds histograms), all
// against the tick's own timestamp, over the window. Gap records are
// counted on the window and for the whole run.
//
// --key authenticates every link with a shared key generated for the run
// (tagged frames, protocol 2), to compare its cost with unkeyed runs.
//
// The top only checks the frames it gets, as a relaying aggregator does
// (times and value counts, no value computed), so that its own decoding
// is not part of the latency measured; --decode makes it decode every
// value (the wire.Handler path), to check them. --sim runs the simulator
// from another vigil binary than the aggregators, to compare simulators
// on the same tree.
//
// --perf FILE records the first aggregator with `perf record -g` during the
// window (build vigil without -s -w so perf finds the symbols).
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bench/internal/benchutil"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

type options struct {
	vigil     string
	sim       string
	decode    bool
	nodes     int
	levels    int
	duration  time.Duration
	warmup    time.Duration
	interval  time.Duration
	cpus      int
	groupSize int
	perf      string
	heap      string
	key       bool
}

func main() {
	var o options
	flag.StringVar(&o.vigil, "vigil", "bin/vigil", "vigil binary")
	flag.StringVar(&o.sim, "sim", "", "vigil binary for the simulator (default: --vigil)")
	flag.BoolVar(&o.decode, "decode", false, "the top decodes every value instead of only checking the frames")
	flag.IntVar(&o.nodes, "nodes", 20000, "simulated nodes")
	flag.IntVar(&o.levels, "levels", 1, "aggregator levels: 1 (sim -> L1 -> top) or 2 (sim -> L1 -> L2 -> top)")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "measurement window")
	flag.DurationVar(&o.warmup, "warmup", 10*time.Second, "time for every node to connect before the window")
	flag.DurationVar(&o.interval, "interval", time.Second, "simulated sampling interval")
	flag.IntVar(&o.cpus, "cpus", 16, "cores per simulated node (16: about 320 values per tick)")
	flag.IntVar(&o.groupSize, "group-size", 500, "simulated nodes per connection")
	flag.StringVar(&o.perf, "perf", "", "write a perf.data of the first aggregator to this file")
	flag.StringVar(&o.heap, "heap", "", "run the aggregators with --debug-pprof and save their heap profiles at the window's start and end in this directory (NAME-start.pb.gz, NAME-end.pb.gz)")
	flag.BoolVar(&o.key, "key", false, "authenticate every link with a shared key generated for the run")
	flag.Parse()
	if o.levels != 1 && o.levels != 2 {
		fmt.Fprintln(os.Stderr, "treeload: --levels must be 1 or 2")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "treeload:", err)
		os.Exit(1)
	}
}

// top records every tick that reaches the top of the tree.
type top struct {
	wire.NopHandler
	w0, w1 int64 // the window: ticks stamped in [w0, w1) count

	mu      sync.Mutex
	seen    map[string]bool
	ticks   int64 // in the window
	values  int64 // in the window
	lat     []time.Duration
	closed  bool // the grace period is over: later ticks count as missing
	gaps    int
	gapsW   int // gap records covering part of the window
	downs   int
	downsW  int // down reports arriving from the window's start on
	foreign int // ticks of nodes that are not simulated (the aggregators' own)
}

func (tp *top) Tick(node string, t time.Time, _ []*metric.Desc, values []float64) {
	tp.arrive(node, nil, t, len(values))
}

// arrive records a tick of n values of node stamped t, of the relayed
// stream src if not nil: a stream already seen is marked in its Fwd, so
// the bench's own bookkeeping is no lookup by name per tick.
func (tp *top) arrive(node string, src *wire.RelaySource, t time.Time, n int) {
	now := time.Now()
	if !strings.HasPrefix(node, "cn") {
		tp.mu.Lock()
		tp.foreign++
		tp.mu.Unlock()
		return
	}
	ts := t.UnixNano()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if src == nil || src.Fwd == nil {
		tp.seen[node] = true
		if src != nil {
			src.Fwd = true
		}
	}
	if ts < tp.w0 || ts >= tp.w1 {
		return
	}
	if tp.closed {
		return
	}
	tp.ticks++
	tp.values += int64(n)
	tp.lat = append(tp.lat, now.Sub(t))
}

func (tp *top) Gap(node string, from, to time.Time) {
	tp.mu.Lock()
	tp.gaps++
	if to.UnixNano() >= tp.w0 && from.UnixNano() < tp.w1 {
		tp.gapsW++
	}
	tp.mu.Unlock()
}

func (tp *top) NodeState(node string, up bool, t time.Time) {
	if !up {
		now := time.Now().UnixNano()
		tp.mu.Lock()
		tp.downs++
		if now >= tp.w0 {
			tp.downsW++
		}
		tp.mu.Unlock()
	}
}

// checkTop is the top as a wire.RelayHandler: the decoder only checks
// values frames (the per-series code mode, no value state), as it does
// for a relaying aggregator, and passes each frame's time and count.
type checkTop struct{ *top }

func (ct checkTop) RelaySchema(string, *wire.RelaySchema) {}

func (ct checkTop) RelayTick(node string, t time.Time, f *wire.RelayFrame) {
	ct.arrive(node, f.Source, t, f.N)
}

func (tp *top) nodesSeen() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.seen)
}

// child is a vigil process.
type child struct {
	name   string
	cmd    *exec.Cmd
	stderr *benchutil.TailBuffer
	http   string // aggregators: /metrics address
	cpu0   int64
	rssMax int64
	rss0   int64 // at the window's start
	rss1   int64 // at its end
}

func startChild(bin, name string, args ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), stderr: &benchutil.TailBuffer{}}
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return c, nil
}

// stop interrupts the child and kills it if it is not gone within 5s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

func run(o options) error {
	bin, err := filepath.Abs(o.vigil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tp := &top{seen: map[string]bool{}, w0: 1<<63 - 1, w1: 1<<63 - 1}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var key []byte
	var keyArgs []string
	if o.key {
		dir, err := os.MkdirTemp("", "treeload")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "cluster.key")
		if err := os.WriteFile(path, []byte(rand.Text()), 0o600); err != nil {
			return err
		}
		if key, err = wire.LoadKey(path); err != nil {
			return err
		}
		keyArgs = []string{"--key", path}
	}
	var topStats wire.ServerStats
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var h wire.Handler = checkTop{tp}
	if o.decode {
		h = tp
	}
	// The top stands in for the server, which decodes every value: it
	// checks them all (or decodes them, --decode).
	go wire.Serve(ctx, ln, wire.ServerOptions{Name: "treeload-top", Key: key, Log: quiet, Stats: &topStats, CheckRelayedValues: true}, h)

	// Aggregators from the top down, each streaming to the one above.
	var aggs []*child // aggs[0] is L1
	upstream := ln.Addr().String()
	for level := o.levels; level >= 1; level-- {
		listen, err := benchutil.FreeAddr()
		if err != nil {
			return err
		}
		httpAddr, err := benchutil.FreeAddr()
		if err != nil {
			return err
		}
		name := fmt.Sprintf("treeload-l%d", level)
		args := append([]string{"aggregator", "--name", name, "--listen", listen, "--upstream", upstream,
			"--http", httpAddr, "--interval", o.interval.String(), "--log-level", "warn"}, keyArgs...)
		if o.heap != "" {
			args = append(args, "--debug-pprof")
		}
		a, err := startChild(bin, name, args...)
		if err != nil {
			return err
		}
		defer a.stop()
		a.http = httpAddr
		aggs = append([]*child{a}, aggs...)
		upstream = listen
		if err := waitHTTP(httpAddr); err != nil {
			return fmt.Errorf("%s: %w\n%s", name, err, a.stderr.String())
		}
	}
	l1 := aggs[0]
	simBin := bin
	if o.sim != "" {
		if simBin, err = filepath.Abs(o.sim); err != nil {
			return err
		}
	}
	sim, err := startChild(simBin, "simulate", append([]string{"simulate", "--nodes", strconv.Itoa(o.nodes), "--interval", o.interval.String(),
		"--cpus", strconv.Itoa(o.cpus), "--group-size", strconv.Itoa(o.groupSize), "--upstream", upstream}, keyArgs...)...)
	if err != nil {
		return err
	}
	defer sim.stop()

	// Warm up until every node has arrived at the top, then open the
	// window on an interval boundary.
	deadline := time.Now().Add(o.warmup)
	for tp.nodesSeen() < o.nodes && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := tp.nodesSeen(); n < o.nodes {
		fmt.Printf("warning: only %d of %d nodes reached the top during the warm-up\n", n, o.nodes)
	}
	w0 := time.Now().Truncate(o.interval).Add(2 * o.interval)
	w1 := w0.Add(o.duration)
	tp.mu.Lock()
	tp.w0, tp.w1 = w0.UnixNano(), w1.UnixNano()
	tp.mu.Unlock()
	time.Sleep(time.Until(w0))

	procs := append([]*child{sim}, aggs...)
	for _, c := range procs {
		if c.cpu0, err = benchutil.CPUNanos(c.cmd.Process.Pid); err != nil {
			return err
		}
		c.rss0, _ = rss(c.cmd.Process.Pid)
	}
	if err := saveHeaps(o.heap, aggs, "start"); err != nil {
		return err
	}
	// The top runs in this process: its CPU (with the scrapes) competes
	// with the tree's for the same cores.
	self0, err := benchutil.CPUNanos(os.Getpid())
	if err != nil {
		return err
	}
	var perf *exec.Cmd
	if o.perf != "" {
		perf = exec.Command("perf", "record", "-F", "499", "-g", "-o", o.perf, "-p", strconv.Itoa(l1.cmd.Process.Pid),
			"--", "sleep", strconv.Itoa(int(o.duration.Seconds())))
		perf.Stderr = os.Stderr
		if err := perf.Start(); err != nil {
			return fmt.Errorf("perf: %w", err)
		}
	}
	in0, err := scrapeAgg(l1.http)
	if err != nil {
		return err
	}
	hist0 := make([]lagHists, len(aggs))
	for i, a := range aggs {
		if hist0[i], err = scrapeLag(a.http); err != nil {
			return err
		}
	}
	simLog0 := len(sim.stderr.String())
	// Once a second: RSS, and bytes per value into L1 over that second.
	var bpv []float64
	prev := in0
	tick := time.NewTicker(time.Second)
	for now := range tick.C {
		for _, c := range procs {
			if r, err := rss(c.cmd.Process.Pid); err == nil {
				c.rssMax = max(c.rssMax, r)
			}
		}
		cur, err := scrapeAgg(l1.http)
		if err == nil {
			if dv := cur.values - prev.values; dv > 0 {
				bpv = append(bpv, (cur.bytes-prev.bytes)/dv)
			}
			prev = cur
		}
		if !now.Before(w1) {
			break
		}
	}
	tick.Stop()
	elapsed := time.Since(w0)
	for _, c := range procs {
		c.rss1, _ = rss(c.cmd.Process.Pid)
	}
	if err := saveHeaps(o.heap, aggs, "end"); err != nil {
		return err
	}
	cpu := make([]float64, len(procs))
	for i, c := range procs {
		c1, err := benchutil.CPUNanos(c.cmd.Process.Pid)
		if err != nil {
			return err
		}
		cpu[i] = float64(c1-c.cpu0) / float64(elapsed.Nanoseconds()) * 100
	}
	self1, err := benchutil.CPUNanos(os.Getpid())
	if err != nil {
		return err
	}
	in1, err := scrapeAgg(l1.http)
	if err != nil {
		return err
	}
	hist1 := make([]lagHists, len(aggs))
	for i, a := range aggs {
		if hist1[i], err = scrapeLag(a.http); err != nil {
			return err
		}
	}
	simLog := sim.stderr.String()[simLog0:]
	if perf != nil {
		_ = perf.Wait()
	}
	// Ticks still in flight get a grace period; later ones count as lost.
	time.Sleep(3 * time.Second)
	tp.mu.Lock()
	tp.closed = true
	got := tp.ticks
	values, gaps, gapsW, downs, downsW := tp.values, tp.gaps, tp.gapsW, tp.downs, tp.downsW
	lat := slices.Clone(tp.lat)
	tp.mu.Unlock()
	slices.Sort(lat)
	slices.Sort(bpv)

	perInterval := int64(o.duration / o.interval)
	want := int64(o.nodes) * perInterval
	secs := o.duration.Seconds()
	simTotals := lastMatch(sim.stderr.String(), `msg=totals .*ticks=(\d+) dropped=(\d+).*overruns=(\d+)`)
	vpn := lastMatch(sim.stderr.String(), `values_per_node=(\d+)`)

	fmt.Printf("treeload: nodes=%d levels=%d interval=%s window=%s cpus/node=%d group=%d key=%v top=%s\n",
		o.nodes, o.levels, o.interval, o.duration, o.cpus, o.groupSize, o.key, map[bool]string{false: "checks", true: "decodes"}[o.decode])
	if len(vpn) == 2 {
		v, _ := strconv.ParseFloat(vpn[1], 64)
		fmt.Printf("  sent (nominal)        %12.0f values/s  (%s values/node/tick)\n", v*float64(o.nodes)/o.interval.Seconds(), vpn[1])
	}
	fmt.Printf("  received by L1        %12.0f values/s\n", (in1.values-in0.values)/secs)
	fmt.Printf("  received at the top   %12.0f values/s\n", float64(values)/secs)
	fmt.Printf("  ticks                 %d of %d received in the window, %d missing 3s after it (%.3f%%), %d gap records on the window (%d whole run), %d down reports (%d after the window opened)\n",
		got, want, want-got, 100*float64(want-got)/float64(max(want, 1)), gapsW, gaps, downs, downsW)
	if len(simTotals) == 4 {
		fmt.Printf("  simulator             ticks=%s dropped=%s overruns=%s (whole run)\n", simTotals[1], simTotals[2], simTotals[3])
	}
	fmt.Printf("  latency at the top    p50 %v  p99 %v  max %v  (arrival - sample timestamp, %d ticks)\n",
		pct(lat, 50), pct(lat, 99), pct(lat, 100), len(lat))
	// Where the time goes: each point's lag behind the tick's timestamp.
	fmt.Printf("  latency by hop        p50 / p99 of (time at that point - sample timestamp), over the window\n")
	if m := simLags(simLog); m != nil {
		fmt.Printf("    %-20s %9v / %-9v (over %s of simulator reports in the window)\n", "simulate: ready", m[0], m[1], m[4])
		fmt.Printf("    %-20s %9v / %-9v\n", "simulate: written", m[2], m[3])
		if b := simBuild(simLog); b != nil {
			fmt.Printf("    %-20s %9v / %-9v (a group's build and encoding of a tick, %s before its time)\n", "simulate: build took", b[0], b[1], b[2])
		}
	}
	for i, a := range aggs {
		rcv := hist1[i].sub(hist0[i], "received")
		wr := hist1[i].sub(hist0[i], "written")
		wait := hist1[i].sub(hist0[i], "wait")
		fmt.Printf("    %-20s %9v / %-9v\n", a.name+": received", rcv.quantile(0.5), rcv.quantile(0.99))
		fmt.Printf("    %-20s %9v / %-9v (of which waiting in its upstream queue: %v / %v)\n", a.name+": written", wr.quantile(0.5), wr.quantile(0.99),
			wait.quantile(0.5), wait.quantile(0.99))
	}
	fmt.Printf("    %-20s %9v / %-9v\n", "top: received", pct(lat, 50), pct(lat, 99))
	if len(bpv) > 0 {
		fmt.Printf("  wire into L1          %.3f bytes/value (median of %d one-second windows)\n", bpv[len(bpv)/2], len(bpv))
	}
	if values > 0 {
		fmt.Printf("  wire into the top     %.3f bytes/value (whole run)\n", float64(topStats.Bytes.Load())/float64(topStats.Values.Load()))
	}
	for _, a := range aggs {
		if c, err := scrapeAgg(a.http); err == nil {
			fmt.Printf("  %-22s dropped %.0f values, %.0f upstream ticks; forwarded %.0f ticks as they came, %.0f encoded again, %.0f not relayable (whole run)\n",
				a.name, c.dropped, c.ticksDropped, c.relayed, c.encoded, c.lost)
		}
	}
	for i, c := range procs {
		fmt.Printf("  %-22s CPU %5.1f%% of a core, max RSS %.1f MiB (%.1f at the window's start, %.1f at its end)\n", c.name, cpu[i],
			float64(c.rssMax)/(1<<20), float64(c.rss0)/(1<<20), float64(c.rss1)/(1<<20))
	}
	fmt.Printf("  %-22s CPU %5.1f%% of a core (the top %s every frame, and the scrapes)\n", "treeload", float64(self1-self0)/float64(elapsed.Nanoseconds())*100,
		map[bool]string{false: "checking", true: "decoding"}[o.decode])
	return nil
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := min(len(d)*p/100, len(d)-1)
	return d[i].Round(100 * time.Microsecond)
}

func lastMatch(s, re string) []string {
	all := regexp.MustCompile(re).FindAllStringSubmatch(s, -1)
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

func waitHTTP(addr string) error {
	for range 100 {
		if _, err := scrapeAgg(addr); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no /metrics on %s", addr)
}

// aggCounters are an aggregator's counters read from its /metrics.
type aggCounters struct{ values, bytes, dropped, ticksDropped, relayed, encoded, lost float64 }

func scrapeAgg(addr string) (aggCounters, error) {
	var c aggCounters
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return c, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	found := 0
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, "{")
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		switch name {
		case "vigil_aggregator_values_received_total":
			c.values, err = strconv.ParseFloat(line[i+1:], 64)
			found++
		case "vigil_aggregator_bytes_received_total":
			c.bytes, err = strconv.ParseFloat(line[i+1:], 64)
			found++
		case "vigil_aggregator_values_dropped_total":
			c.dropped, err = strconv.ParseFloat(line[i+1:], 64)
		case "vigil_aggregator_upstream_ticks_dropped_total":
			c.ticksDropped, err = strconv.ParseFloat(line[i+1:], 64)
		case "vigil_aggregator_forwarded_ticks_total":
			switch {
			case strings.Contains(line, `how="relayed"`):
				c.relayed, err = strconv.ParseFloat(line[i+1:], 64)
			case strings.Contains(line, `how="encoded"`):
				c.encoded, err = strconv.ParseFloat(line[i+1:], 64)
			case strings.Contains(line, `how="lost"`):
				c.lost, err = strconv.ParseFloat(line[i+1:], 64)
			}
		}
		if err != nil {
			return c, fmt.Errorf("%s: %q: %w", addr, line, err)
		}
	}
	if found != 2 {
		return c, fmt.Errorf("%s: counters missing from /metrics", addr)
	}
	return c, sc.Err()
}

// lagHists are an aggregator's latency histograms (cumulative bucket
// counts by upper bound) read from its /metrics: received and written
// (vigil_aggregator_tick_lag_seconds) and wait (upstream queue).
type lagHists map[string]*hist

type hist struct {
	le []float64
	n  []float64
}

func (h lagHists) sub(old lagHists, point string) *hist {
	cur, prev := h[point], old[point]
	if cur == nil {
		return &hist{}
	}
	d := &hist{le: cur.le, n: slices.Clone(cur.n)}
	if prev != nil && len(prev.n) == len(cur.n) {
		for i := range d.n {
			d.n[i] -= prev.n[i]
		}
	}
	return d
}

// quantile interpolates linearly within the bucket holding rank q.
func (h *hist) quantile(q float64) time.Duration {
	if len(h.n) == 0 || h.n[len(h.n)-1] == 0 {
		return 0
	}
	rank := q * h.n[len(h.n)-1]
	lo, below := 0.0, 0.0
	for i, c := range h.n {
		if c >= rank {
			hi := h.le[i]
			if math.IsInf(hi, 1) {
				return time.Duration(lo * 1e9).Round(time.Millisecond)
			}
			f := 0.0
			if c > below {
				f = (rank - below) / (c - below)
			}
			return time.Duration((lo + f*(hi-lo)) * 1e9).Round(100 * time.Microsecond)
		}
		lo, below = h.le[i], c
	}
	return 0
}

var bucketRE = regexp.MustCompile(`^(vigil_aggregator_tick_lag_seconds|vigil_aggregator_upstream_wait_seconds)_bucket\{(?:point="(\w+)",)?le="([^"]+)"\} (\S+)$`)

func scrapeLag(addr string) (lagHists, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	hs := lagHists{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		m := bucketRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		point := m[2]
		if m[1] == "vigil_aggregator_upstream_wait_seconds" {
			point = "wait"
		}
		le, err1 := strconv.ParseFloat(m[3], 64)
		n, err2 := strconv.ParseFloat(m[4], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad bucket %q", addr, sc.Text())
		}
		h := hs[point]
		if h == nil {
			h = &hist{}
			hs[point] = h
		}
		h.le = append(h.le, le)
		h.n = append(h.n, n)
	}
	// An older vigil has none: its hops print as 0.
	return hs, sc.Err()
}

// simLags returns the simulator's built and written p50 and p99 from its
// totals lines logged in the window: the median of each over the lines
// after the first (which covers part of the warm-up), and how long those
// lines cover. A p99 is the largest of the lines' p99s.
func simLags(log string) []any {
	all := regexp.MustCompile(`msg=totals .*produced_p50=(\S+) produced_p99=(\S+) written_p50=(\S+) written_p99=(\S+)`).FindAllStringSubmatch(log, -1)
	if len(all) > 1 {
		all = all[1:]
	}
	if len(all) == 0 {
		return nil
	}
	out := make([]any, 5)
	for k := 1; k <= 4; k++ {
		var ds []time.Duration
		for _, m := range all {
			d, err := time.ParseDuration(m[k])
			if err != nil {
				return nil
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		if k%2 == 1 {
			out[k-1] = ds[len(ds)/2]
		} else {
			out[k-1] = ds[len(ds)-1]
		}
	}
	out[4] = fmt.Sprintf("%d×10s", len(all))
	return out
}

// simBuild returns the median of the simulator's build_p50 and the largest
// build_p99 over its totals lines after the first, and its lead (a
// simulator that builds ticks on time logs none).
func simBuild(log string) []any {
	all := regexp.MustCompile(`msg=totals .*build_p50=(\S+) build_p99=(\S+) lead=(\S+)`).FindAllStringSubmatch(log, -1)
	if len(all) > 1 {
		all = all[1:]
	}
	if len(all) == 0 {
		return nil
	}
	var p50, p99 []time.Duration
	for _, m := range all {
		a, err1 := time.ParseDuration(m[1])
		b, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil {
			return nil
		}
		p50, p99 = append(p50, a), append(p99, b)
	}
	slices.Sort(p50)
	slices.Sort(p99)
	return []any{p50[len(p50)/2], p99[len(p99)-1], all[0][3]}
}

func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// saveHeaps writes each aggregator's heap profile to dir/NAME-when.pb.gz
// (nothing without dir).
func saveHeaps(dir string, aggs []*child, when string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, a := range aggs {
		resp, err := http.Get("http://" + a.http + "/debug/pprof/heap")
		if err != nil {
			return fmt.Errorf("%s heap profile: %w", a.name, err)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s heap profile: status %d, %v", a.name, resp.StatusCode, err)
		}
		if err := os.WriteFile(filepath.Join(dir, a.name+"-"+when+".pb.gz"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
