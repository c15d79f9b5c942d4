// Command psnap measures what monitoring costs an application, the way the
// Trinity team did with PSNAP: a fixed work quantum (about 1 ms of integer
// arithmetic) runs in a loop on every core, and each quantum's duration is
// recorded. Runs without monitoring and with the streaming sampler at each
// interval are interleaved, and a second run without monitoring (A/A) shows
// how much of a difference this machine's noise alone makes.
//
//	make build && go run ./bench/psnap --vigil bin/vigil-sampler --duration 20s --runs 5
//
// Whole runs per condition leave a shared machine's drift between them
// (±2 % between runs on our VMs). With --paired SLICE each sampler runs
// once and is stopped (SIGSTOP) and resumed in slices, in pairs of random
// order, so each pair compares the two states a few seconds apart; an A/A
// pass keeps it stopped in both halves. The sampler's own CPU over its
// running slices, as a share of the work loops' cores, is printed beside
// the slowdown: what the slowdown would be if the sampler cost the
// application only the time it ran.
//
//	go run ./bench/psnap --vigil bin/vigil-sampler --paired 2s --duration 120s
//
// The sampler streams to a receiver inside this tool that acknowledges and
// discards its ticks (as its aggregator would, off the node), so the
// receiver's small cost is counted against the application too: the figure
// is an upper bound.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bench/internal/benchutil"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func main() {
	var c config
	flag.StringVar(&c.vigil, "vigil", "bin/vigil-sampler", "the node daemon binary")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "measurement time per condition and run")
	flag.DurationVar(&c.warmup, "warmup", 2*time.Second, "time the sampler runs before a measurement")
	flag.DurationVar(&c.quantum, "quantum", time.Millisecond, "work quantum")
	flag.IntVar(&c.runs, "runs", 5, "interleaved runs of every condition")
	flag.IntVar(&c.workers, "workers", runtime.NumCPU(), "work loops, one per core")
	flag.StringVar(&c.intervals, "intervals", "1s,100ms", "sampler intervals to measure, comma-separated")
	flag.StringVar(&c.plugins, "plugins", "", "sampler plugins (empty: its defaults)")
	flag.DurationVar(&c.slice, "paired", 0, "stop and resume one sampler per interval in slices of this length, in pairs, for --duration (0: whole runs per condition)")
	flag.Parse()
	if err := c.run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "psnap:", err)
		os.Exit(1)
	}
}

type config struct {
	vigil, intervals, plugins string
	duration, warmup, quantum time.Duration
	slice                     time.Duration // --paired
	runs, workers             int
	spins                     uint64 // iterations in one quantum, calibrated
	upstream                  string
}

// condition is what runs beside the work loops: nothing, or the sampler at
// an interval.
type condition struct {
	name     string
	interval time.Duration // 0: no sampler
}

func (c *config) run(out io.Writer) error {
	if c.runs < 1 || c.workers < 1 || c.quantum <= 0 || c.duration <= 0 {
		return fmt.Errorf("--runs, --workers, --quantum and --duration must be positive")
	}
	conds := []condition{{name: "none"}, {name: "none (A/A)"}}
	for _, s := range strings.Split(c.intervals, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < time.Millisecond {
			return fmt.Errorf("--intervals: %q is not a duration of at least 1ms", s)
		}
		conds = append(conds, condition{name: "sampler " + d.String(), interval: d})
	}
	if _, err := os.Stat(c.vigil); err != nil {
		return fmt.Errorf("--vigil: %w (run make build)", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		_ = wire.Serve(ctx, ln, wire.ServerOptions{Log: slog.New(slog.DiscardHandler)}, wire.Discard{})
	}()
	c.upstream = ln.Addr().String()

	c.spins = calibrate(c.quantum)
	if c.slice > 0 {
		return c.runPaired(ctx, out, conds[2:])
	}
	fmt.Fprintf(out, "psnap: %d work loops, quantum %v (%d iterations), %v per condition, %d runs\n",
		c.workers, c.quantum, c.spins, c.duration, c.runs)
	results := make(map[string][]stats)
	for r := range c.runs {
		// Rotate the order so no condition always follows another.
		order := slices.Clone(conds)
		for range r % len(order) {
			order = append(order[1:], order[0])
		}
		for _, cd := range order {
			st, err := c.measure(ctx, cd)
			if err != nil {
				return err
			}
			results[cd.name] = append(results[cd.name], st)
			fmt.Fprintf(out, "run %d  %-16s %s\n", r+1, cd.name, st)
		}
	}
	fmt.Fprintln(out, "\nslowdown of the mean quantum against 'none' in the same run (median of runs), and the pooled tail:")
	for _, cd := range conds[1:] {
		var slow []float64
		for r := range c.runs {
			slow = append(slow, 100*(results[cd.name][r].mean/results["none"][r].mean-1))
		}
		fmt.Fprintf(out, "  %-16s slowdown %+.4f %% (runs: %s)\n", cd.name, median(slow), join(slow))
	}
	fmt.Fprintln(out, "\nhistogram of quantum durations (all runs pooled), share of quanta per bucket:")
	fmt.Fprintf(out, "  %-16s", "")
	for _, b := range buckets {
		fmt.Fprintf(out, " %9s", b.name)
	}
	fmt.Fprintln(out)
	for _, cd := range conds {
		var h [len(buckets)]int
		total := 0
		for _, st := range results[cd.name] {
			for i, n := range st.hist {
				h[i] += n
				total += n
			}
		}
		fmt.Fprintf(out, "  %-16s", cd.name)
		for _, n := range h {
			fmt.Fprintf(out, " %8.4f%%", 100*float64(n)/float64(max(total, 1)))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// measure runs the work loops for c.duration beside cd and returns the
// quanta's statistics.
func (c *config) measure(ctx context.Context, cd condition) (stats, error) {
	if cd.interval > 0 {
		stop, err := c.startSampler(ctx, cd.interval)
		if err != nil {
			return stats{}, err
		}
		defer stop()
		time.Sleep(c.warmup)
	}
	qs := c.work(time.Now().Add(c.duration))()
	all := make([]time.Duration, len(qs))
	for i, q := range qs {
		all[i] = q.d
	}
	return summarise(all, c.quantum), nil
}

// startSampler runs the node daemon streaming to the discarding receiver
// and returns once its /metrics answers.
func (c *config) startSampler(ctx context.Context, interval time.Duration) (stop func(), err error) {
	stop, _, err = c.startSamplerProc(ctx, interval)
	return stop, err
}

// startSamplerProc is startSampler, and returns the sampler's process.
func (c *config) startSamplerProc(ctx context.Context, interval time.Duration) (stop func(), p *os.Process, err error) {
	addr, err := benchutil.FreeAddr()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"--interval", interval.String(), "--upstream", c.upstream, "--listen", addr, "--log-level", "warn"}
	if c.plugins != "" {
		args = append(args, "--plugins", c.plugins)
	}
	cmd := exec.CommandContext(ctx, c.vigil, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", c.vigil, err)
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process would not see the TERM
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
	hc := http.Client{Timeout: time.Second}
	for range 100 {
		if resp, err := hc.Get("http://" + addr + "/metrics"); err == nil {
			resp.Body.Close()
			return stop, cmd.Process, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return nil, nil, fmt.Errorf("%s: no /metrics at %s after 5s", c.vigil, addr)
}

// quantum is one work quantum: when it started and how long it took.
type quantum struct {
	start time.Time
	d     time.Duration
}

// work starts the work loops, one per core, until end, and returns a
// function that waits for them and returns every quantum.
func (c *config) work(end time.Time) (wait func() []quantum) {
	per := make([][]quantum, c.workers)
	n := int(time.Until(end)/c.quantum) + 16
	var wg sync.WaitGroup
	for w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			qs := make([]quantum, 0, n)
			for {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				sink.Add(spin(c.spins))
				qs = append(qs, quantum{t0, time.Since(t0)})
			}
			per[w] = qs
		}()
	}
	return func() []quantum {
		wg.Wait()
		var all []quantum
		for _, qs := range per {
			all = append(all, qs...)
		}
		return all
	}
}

// sink keeps the work from being optimised away.
var sink atomic.Uint64

// spin is the work quantum: n rounds of xorshift, no memory traffic.
func spin(n uint64) uint64 {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// calibrate returns the iterations spin needs for q, from the fastest of
// repeated timings (the fastest is the one nothing interrupted).
func calibrate(q time.Duration) uint64 {
	n := uint64(100_000)
	for range 3 {
		best := time.Duration(1 << 62)
		for range 50 {
			t0 := time.Now()
			sink.Add(spin(n))
			best = min(best, time.Since(t0))
		}
		n = max(1, uint64(float64(n)*float64(q)/float64(best)))
	}
	return n
}

type stats struct {
	n                    int
	mean                 float64 // ns
	p50, p99, p999, maxd time.Duration
	hist                 [len(buckets)]int
}

// buckets are quantum durations relative to the calibrated quantum.
var buckets = [...]struct {
	name string
	upTo float64 // multiple of the quantum, exclusive
}{
	{"<1.01q", 1.01}, {"<1.05q", 1.05}, {"<1.2q", 1.2}, {"<1.5q", 1.5}, {"<2q", 2}, {"<5q", 5}, {"<10q", 10}, {">=10q", 1e18},
}

func summarise(ds []time.Duration, q time.Duration) stats {
	st := stats{n: len(ds)}
	if len(ds) == 0 {
		return st
	}
	var sum float64
	for _, d := range ds {
		sum += float64(d)
		r := float64(d) / float64(q)
		for i, b := range buckets {
			if r < b.upTo {
				st.hist[i]++
				break
			}
		}
	}
	st.mean = sum / float64(len(ds))
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	st.p50, st.p99, st.p999, st.maxd = at(0.5), at(0.99), at(0.999), ds[len(ds)-1]
	return st
}

func (s stats) String() string {
	return fmt.Sprintf("quanta %7d  mean %8.1f µs  p50 %v  p99 %v  p99.9 %v  max %v",
		s.n, s.mean/1e3, s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.p999.Round(time.Microsecond), s.maxd.Round(time.Microsecond))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func join(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%+.3f", x)
	}
	return strings.Join(parts, " ")
}
