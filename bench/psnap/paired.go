package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bench/internal/benchutil"
)

// slice is one stretch of a paired measurement. The treated slice of each
// pair is the one the sampler runs in (in the A/A pass it stays stopped).
type slice struct {
	start, end       time.Time
	treated, running bool
	cpu              int64 // the sampler's CPU nanoseconds over the slice
}

// pairedResult is one condition's paired measurement.
type pairedResult struct {
	slow     []float64 // per pair: mean quantum, running ÷ stopped − 1, in %
	cpuShare float64   // the sampler's CPU over running slices ÷ (their time × workers), in %
	tail     [2]int    // quanta ≥ 1.5 q in untreated, treated slices
	n        [2]int    // quanta in untreated, treated slices
}

// runPaired measures each sampler interval by stopping and resuming one
// sampler, and an A/A pass with the sampler of the first interval kept
// stopped in both halves of every pair.
func (c *config) runPaired(ctx context.Context, out io.Writer, conds []condition) error {
	pairs := max(2, int(c.duration/(2*c.slice)))
	fmt.Fprintf(out, "psnap --paired: %d work loops, quantum %v (%d iterations), slices of %v, %d pairs per condition\n\n",
		c.workers, c.quantum, c.spins, c.slice, pairs)
	fmt.Fprintln(out, "| condition | slowdown, mean ± 95 % | median of pairs | sampler CPU ÷ cores | quanta ≥ 1.5 q stopped / running |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	tests := append([]condition{{name: "A/A (stopped in both)", interval: conds[0].interval}}, conds...)
	for i, cd := range tests {
		r, err := c.paired(ctx, cd, pairs, i > 0)
		if err != nil {
			return err
		}
		m, ci := meanCI(r.slow)
		fmt.Fprintf(out, "| %s | %+.3f ± %.3f %% | %+.3f %% | %.3f %% | %.3f / %.3f %% |\n", cd.name, m, ci, median(r.slow), r.cpuShare,
			100*float64(r.tail[0])/float64(max(r.n[0], 1)), 100*float64(r.tail[1])/float64(max(r.n[1], 1)))
	}
	return nil
}

// paired runs the work loops for pairs × 2 slices beside one sampler at
// cd.interval: one slice of each pair, chosen at random, is treated (the
// sampler runs in it if run), the other not (it is stopped).
func (c *config) paired(ctx context.Context, cd condition, pairs int, run bool) (pairedResult, error) {
	stop, proc, err := c.startSamplerProc(ctx, cd.interval)
	if err != nil {
		return pairedResult{}, err
	}
	defer stop()
	time.Sleep(c.warmup)
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		return pairedResult{}, err
	}
	plan := make([]bool, 0, 2*pairs) // treated, per slice
	for range pairs {
		first := rand.N(2) == 0
		plan = append(plan, first, !first)
	}

	begin := time.Now()
	wait := c.work(begin.Add(time.Duration(len(plan)) * c.slice))
	// The controller sleeps through each slice; its few system calls at
	// each boundary fall alike on both states.
	sls := make([]slice, len(plan))
	cpu, err := benchutil.CPUNanos(proc.Pid)
	if err != nil {
		return pairedResult{}, err
	}
	for i, treated := range plan {
		sl := &sls[i]
		sl.start, sl.treated, sl.running = begin.Add(time.Duration(i)*c.slice), treated, treated && run
		sl.end = sl.start.Add(c.slice)
		sig := syscall.SIGSTOP
		if sl.running {
			sig = syscall.SIGCONT
		}
		if err := proc.Signal(sig); err != nil {
			return pairedResult{}, err
		}
		time.Sleep(time.Until(sl.end))
		if err := proc.Signal(syscall.SIGSTOP); err != nil {
			return pairedResult{}, err
		}
		now, err := benchutil.CPUNanos(proc.Pid)
		if err != nil {
			return pairedResult{}, err
		}
		sl.cpu, cpu = now-cpu, now
	}
	qs := wait()

	// Each quantum counts in the slice it started in.
	sum := make([]float64, len(sls))
	cnt := make([]int, len(sls))
	var r pairedResult
	for _, q := range qs {
		i := sort.Search(len(sls), func(i int) bool { return sls[i].end.After(q.start) })
		if i == len(sls) {
			continue
		}
		sum[i] += float64(q.d)
		cnt[i]++
		k := 0
		if sls[i].treated {
			k = 1
		}
		r.n[k]++
		if float64(q.d) >= 1.5*float64(c.quantum) {
			r.tail[k]++
		}
	}
	var runCPU, runTime float64
	for p := range pairs {
		a, b := 2*p, 2*p+1 // a untreated, b treated
		if sls[a].treated {
			a, b = b, a
		}
		if cnt[a] == 0 || cnt[b] == 0 {
			continue
		}
		r.slow = append(r.slow, 100*((sum[b]/float64(cnt[b]))/(sum[a]/float64(cnt[a]))-1))
		if sls[b].running {
			runCPU += float64(sls[b].cpu)
			runTime += float64(c.slice)
		}
	}
	if runTime > 0 {
		r.cpuShare = 100 * runCPU / (runTime * float64(c.workers))
	}
	return r, nil
}

// meanCI returns the mean of xs and the half-width of its 95 % confidence
// interval (normal approximation).
func meanCI(xs []float64) (mean, half float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, math.NaN()
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, 1.96 * math.Sqrt(ss/float64(len(xs)-1)/float64(len(xs)))
}
