package health

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Status is the latest result of one check.
type Status struct {
	Name string
	// Done is false until the check's first run has finished; a check
	// without a result reports nothing.
	Done     bool
	OK       bool
	Reason   string // sanitised (Reason), "" while OK
	Duration time.Duration
	Failed   uint64 // runs that failed (timeouts included)
	Timeouts uint64 // runs that timed out or could not start because an earlier one hung
}

// Runner runs checks on their schedules in its own goroutines: a
// scheduler and Concurrency workers. A built-in check stuck in a system
// call (statfs of a dead NFS server) is abandoned at its timeout and not
// started again until it returns; commands are killed with their group.
type Runner struct {
	checks      []*Check
	env         env
	concurrency int
	log         *slog.Logger

	mu       sync.Mutex
	status   []Status
	inflight []bool // a run is queued or running (or hung)
	hung     []bool // the running one was abandoned at its timeout
	gen      atomic.Uint64
	pending  int           // checks without a first result
	first    chan struct{} // closed once every check has a result

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewRunner prepares checks reading files under fs (not started).
func NewRunner(checks []*Check, fs kernfs.FS, concurrency int, log *slog.Logger) *Runner {
	if concurrency < 1 {
		concurrency = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{checks: checks, env: env{fs: fs}, concurrency: concurrency, log: log,
		status: make([]Status, len(checks)), inflight: make([]bool, len(checks)), hung: make([]bool, len(checks)),
		pending: len(checks), first: make(chan struct{})}
	for i, c := range checks {
		r.status[i].Name = c.Name
	}
	if len(checks) == 0 {
		close(r.first)
	}
	return r
}

// Start runs every check now and then every its interval until Close.
func (r *Runner) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	jobs := make(chan int, len(r.checks)) // a check is queued at most once
	r.wg.Add(1 + r.concurrency)
	go func() {
		defer r.wg.Done()
		defer close(jobs)
		r.schedule(ctx, jobs)
	}()
	for range r.concurrency {
		go func() {
			defer r.wg.Done()
			for i := range jobs {
				if ctx.Err() != nil {
					r.release(i)
					continue
				}
				r.runOne(ctx, i)
			}
		}()
	}
}

// Close stops the schedule, kills running commands and waits for the
// workers (not for built-in checks stuck in the kernel).
func (r *Runner) Close() {
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
	}
}

// schedule queues each check when due; one whose last run has not
// finished counts a failed run instead.
func (r *Runner) schedule(ctx context.Context, jobs chan<- int) {
	next := make([]time.Time, len(r.checks))
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		now := time.Now()
		earliest := now.Add(24 * time.Hour)
		for i, c := range r.checks {
			if !next[i].After(now) {
				next[i] = now.Add(c.Interval)
				r.mu.Lock()
				busy, hung := r.inflight[i], r.hung[i]
				if !busy {
					r.inflight[i] = true
				} else if hung {
					r.record(i, outcome{timedOut: true, reason: "an earlier run has not returned"}, 0)
				}
				r.mu.Unlock()
				if !busy {
					jobs <- i
				}
			}
			if next[i].Before(earliest) {
				earliest = next[i]
			}
		}
		t.Reset(earliest.Sub(now))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Runner) release(i int) {
	r.mu.Lock()
	r.inflight[i] = false
	r.mu.Unlock()
}

// runOne runs check i with its timeout and records the outcome. The check
// runs in a goroutine of its own so that one stuck in a system call is
// abandoned (and reported) rather than holding the worker.
func (r *Runner) runOne(parent context.Context, i int) {
	c := r.checks[i]
	ctx, cancel := context.WithTimeout(parent, c.Timeout)
	defer cancel()
	start := time.Now()
	done := make(chan outcome, 1)
	go func() {
		o := r.safeRun(ctx, c)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.hung[i] { // abandoned: the worker has moved on
			r.hung[i], r.inflight[i] = false, false
			return
		}
		done <- o // under mu: the worker sees it or marks the run hung, not both
	}()
	// Commands get their kill grace before the group is SIGKILLed.
	limit := time.NewTimer(c.Timeout + killGrace(c.Timeout) + 500*time.Millisecond)
	defer limit.Stop()
	var o outcome
	select {
	case o = <-done:
	case <-limit.C:
		r.mu.Lock()
		select {
		case o = <-done:
			r.mu.Unlock()
		default:
			r.hung[i] = true
			r.record(i, outcome{timedOut: true, reason: "did not return"}, time.Since(start))
			r.mu.Unlock()
			r.log.Warn("health check hung, abandoned", "check", c.Name, "after", time.Since(start).Round(time.Millisecond))
			return
		}
	}
	if !o.ok && ctx.Err() == context.DeadlineExceeded {
		o.timedOut = true
	}
	if parent.Err() != nil { // shutting down: not a result
		r.release(i)
		return
	}
	r.mu.Lock()
	r.record(i, o, time.Since(start))
	r.inflight[i] = false
	r.mu.Unlock()
}

// safeRun turns a panicking check into a failure.
func (r *Runner) safeRun(ctx context.Context, c *Check) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = fail("check panicked: %v", p)
		}
	}()
	return c.run(ctx, &r.env)
}

// record stores an outcome; r.mu is held.
func (r *Runner) record(i int, o outcome, took time.Duration) {
	c, s := r.checks[i], &r.status[i]
	wasOK, wasDone := s.OK, s.Done
	s.Duration = took
	s.OK = o.ok
	if o.ok {
		s.Reason = ""
	} else {
		reason := o.reason
		if o.timedOut {
			reason = fmt.Sprintf("timed out after %v", c.Timeout)
			if o.reason != "" {
				reason += ": " + o.reason
			}
			s.Timeouts++
		}
		s.Failed++
		s.Reason = Reason(reason)
	}
	if !wasDone {
		s.Done = true
		r.pending--
		if r.pending == 0 {
			close(r.first)
		}
	}
	if wasDone && wasOK != s.OK || !wasDone && !s.OK {
		if s.OK {
			r.log.Info("health check passes again", "check", c.Name)
		} else {
			r.log.Warn("health check fails", "check", c.Name, "reason", s.Reason)
		}
	}
	r.gen.Add(1)
}

// Gen changes whenever a result is recorded.
func (r *Runner) Gen() uint64 { return r.gen.Load() }

// Snapshot copies the statuses into dst (reused) in check order.
func (r *Runner) Snapshot(dst []Status) []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(dst[:0], r.status...)
}

// FirstRound is closed once every check has its first result.
func (r *Runner) FirstRound() <-chan struct{} { return r.first }

// RunAll runs every check once, now, in the calling goroutine (no
// timeouts beyond ctx), as a round of the schedule does (a missing process
// scans /proc again): for benchmarks and one-shot tools.
func (r *Runner) RunAll(ctx context.Context) {
	r.env.procs.expire()
	r.env.mounts.expire()
	for i, c := range r.checks {
		start := time.Now()
		o := r.safeRun(ctx, c)
		r.mu.Lock()
		r.record(i, o, time.Since(start))
		r.mu.Unlock()
	}
}
