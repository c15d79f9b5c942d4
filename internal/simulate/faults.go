package simulate

import (
	"fmt"
	"math"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// FaultOptions configure NewFaults.
type FaultOptions struct {
	Nodes    int
	Interval time.Duration // the nodes' tick interval
	Seed     uint64
	// Start is the time of tick 0 (the simulation's first); the schedule
	// counts ticks from it.
	Start time.Time
	// Health: about one node in 200 (at least one from 20 nodes) fails a
	// health check for 3 to 6 minutes in every 10, the first 30 s after
	// the start. Outages: about one node in 500 (at least one from 50)
	// goes silent for about 90 s in every 10 minutes, the first between
	// 1 and 3 minutes after the start.
	Health, Outages bool
	// Scale multiplies the schedule's durations (0: 1); tests use a small
	// one to see minutes in seconds.
	Scale float64
}

// Faults decides which simulated nodes fail health checks and go silent,
// and when. Every answer is a function of the seed, the node and the tick
// (a hash, no state, no lock), so the node groups agree without talking,
// a run is reproducible, and skipped ticks change nothing.
type Faults struct {
	o FaultOptions
	n uint64
	// Health, in check runs of checkEvery ticks (as the health plugin,
	// every check runs at start and then every interval).
	checkEvery                int64
	flaky, flakyMul, flakyAdd uint64 // flaky nodes: those i with (mul·i + add) mod n < flaky
	// Outages, in ticks.
	outN, outMul              uint64
	outPeriod, outMin, outMax int64
	firstOutMin, firstOutMax  int64
}

// The health schedule in check runs (30 s each at scale 1).
const (
	checkEvery   = 30 * time.Second
	healthPeriod = 20 // runs: 10 minutes
	failMinRuns  = 6  // 3 minutes
	failMaxRuns  = 12 // 6 minutes
	// A node silent fewer ticks is not seen down (3 silent intervals).
	minOutageTicks = 6
)

// simChecks are the checks every simulated node runs, with the reasons
// they fail with, worded as the health plugin's built-in checks and a
// command check word them.
var simChecks = [...]struct {
	name    string
	base    float64 // typical duration of a run, seconds
	reasons []string
}{
	{"scratch_rw", 0.003, []string{"/scratch: cannot create a file: read-only file system", "/scratch is mounted read-only"}},
	{"ib0_up", 0.012, []string{"exit status 1: ib0: port state DOWN", timeoutReason}},
	{"munge_running", 0.0004, []string{"no process munged running"}},
	{"free_tmp", 0.00005, []string{"/tmp: less than 10% free"}},
}

const (
	timeoutReason  = "timed out after 10s: process group killed"
	timeoutSeconds = 10
	nChecks        = len(simChecks)
)

// healthDescs are the health plugin's series of the simulated checks,
// shared by all nodes (a failure series per check and reason).
type healthDescs struct {
	ok, dur, failed, timeouts [nChecks]*metric.Desc
	failure                   [nChecks][]*metric.Desc
}

func newHealthDescs() *healthDescs {
	h := &healthDescs{}
	for c, ck := range simChecks {
		h.ok[c] = metric.NewDesc("vigil_health_check_ok", "1 if the health check passed on its last run, 0 if it failed.", metric.Gauge, "check", ck.name)
		h.dur[c] = metric.NewDesc("vigil_health_check_duration_seconds", "How long the health check's last run took.", metric.Gauge, "check", ck.name)
		h.failed[c] = metric.NewDesc("vigil_health_checks_failed_total", "Runs of the health check that failed (timeouts included).", metric.Counter, "check", ck.name)
		h.timeouts[c] = metric.NewDesc("vigil_health_check_timeouts_total", "Runs of the health check that timed out (commands killed with their process group).", metric.Counter, "check", ck.name)
		for _, r := range ck.reasons {
			h.failure[c] = append(h.failure[c], metric.NewDesc("vigil_health_check_failure",
				"1 while the health check fails, with the first line of its output or message as the reason.", metric.Gauge, "check", ck.name, "reason", r))
		}
	}
	return h
}

// HealthSeries is the number of health series a node sends while all its
// checks pass (one more while one fails).
const HealthSeries = 4 * nChecks

// NewFaults returns the fault schedule o describes.
func NewFaults(o FaultOptions) (*Faults, error) {
	switch {
	case o.Nodes <= 0:
		return nil, fmt.Errorf("faults: nodes %d: must be positive", o.Nodes)
	case o.Interval <= 0:
		return nil, fmt.Errorf("faults: interval %s: must be positive", o.Interval)
	case o.Scale < 0 || math.IsNaN(o.Scale) || math.IsInf(o.Scale, 0):
		return nil, fmt.Errorf("faults: scale %v: want a positive number", o.Scale)
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	f := &Faults{o: o, n: uint64(o.Nodes)}
	ticks := func(d time.Duration) int64 {
		return max(int64(math.Round(float64(d)*o.Scale/float64(o.Interval))), 1)
	}
	f.checkEvery = ticks(checkEvery)
	if o.Health {
		k := uint64(math.Round(float64(o.Nodes) / 200))
		if k == 0 && o.Nodes >= 20 {
			k = 1
		}
		f.flaky, f.flakyMul, f.flakyAdd = k, f.coprime(1), f.hash(2, 0, 0)%f.n
	}
	if o.Outages {
		k := uint64(math.Round(float64(o.Nodes) / 500))
		if k == 0 && o.Nodes >= 50 {
			k = 1
		}
		f.outN, f.outMul = k, f.coprime(3)
		f.outMin = max(ticks(80*time.Second), minOutageTicks)
		f.outMax = max(ticks(100*time.Second), f.outMin)
		f.firstOutMin = ticks(time.Minute)
		f.firstOutMax = max(ticks(3*time.Minute), f.firstOutMin)
		f.outPeriod = max(ticks(10*time.Minute), f.firstOutMax+f.outMax+1)
	}
	return f, nil
}

// Hash tags, so that each decision draws its own numbers.
const (
	tagOutBlock = 10 + iota
	tagOutAt
	tagFail
)

func mix(x uint64) uint64 { // splitmix64's finaliser
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func (f *Faults) hash(tag, a, b uint64) uint64 {
	return mix(f.o.Seed ^ mix(tag^mix(a+0x9e3779b97f4a7c15*mix(b+1))))
}

// coprime draws a multiplier coprime to the node count: i → (m·i + a) mod
// n is then a permutation, so exactly the nodes it maps below k are picked,
// spread over the cluster rather than in one block.
func (f *Faults) coprime(tag uint64) uint64 {
	if f.n <= 2 {
		return 1
	}
	m := 1 + f.hash(tag, 0, 0)%(f.n-1)
	for gcd(m, f.n) != 1 {
		m = m%(f.n-1) + 1
	}
	return m
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// step is t's tick number (negative before the start).
func (f *Faults) step(t time.Time) int64 {
	return int64(math.Round(float64(t.Sub(f.o.Start)) / float64(f.o.Interval)))
}

// Silent reports whether node i (counting from 0) is in an outage at t:
// it sends nothing.
func (f *Faults) Silent(i int, t time.Time) bool {
	if f.outN == 0 || i < 0 || uint64(i) >= f.n {
		return false
	}
	k := f.step(t)
	if k < 0 {
		return false
	}
	p := k / f.outPeriod
	if (f.outMul*uint64(i)+f.hash(tagOutBlock, uint64(p), 0)%f.n)%f.n >= f.outN {
		return false
	}
	h := f.hash(tagOutAt, uint64(p), uint64(i))
	dur := f.outMin + int64(h%uint64(f.outMax-f.outMin+1))
	var off int64
	if h >>= 20; p == 0 {
		off = f.firstOutMin + int64(h%uint64(f.firstOutMax-f.firstOutMin+1))
	} else {
		off = int64(h % uint64(f.outPeriod-dur+1))
	}
	e := k - p*f.outPeriod
	return e >= off && e < off+dur
}

// Flaky is the number of nodes that fail health checks now and then.
func (f *Faults) Flaky() int { return int(f.flaky) }

// Outages is the number of nodes that go silent in each outage period.
func (f *Faults) Outages() int { return int(f.outN) }

// rank is node i's place among the flaky nodes, or -1.
func (f *Faults) rank(i int) int64 {
	if f.flaky == 0 || i < 0 || uint64(i) >= f.n {
		return -1
	}
	r := (f.flakyMul*uint64(i) + f.flakyAdd) % f.n
	if r >= f.flaky {
		return -1
	}
	return int64(r)
}

// failing returns the check node i fails at check run r and the reason's
// index, or -1. A flaky node fails one check once in every period of
// healthPeriod runs, starting after at least one passing run; the first
// flaky node's first failure is at run 1, so a demo shows one soon.
func (f *Faults) failing(i int, r int64) (check, reason int) {
	q := f.rank(i)
	if q < 0 || r < 1 {
		return -1, -1
	}
	p := r / healthPeriod
	h := f.hash(tagFail, uint64(p), uint64(i))
	n := failMinRuns + int64(h%(failMaxRuns-failMinRuns+1))
	h >>= 8
	off := 1 + int64(h%uint64(healthPeriod-n))
	if p == 0 && q == 0 {
		off = 1
	}
	if e := r - p*healthPeriod; e < off || e >= off+n {
		return -1, -1
	}
	h >>= 16
	check = int(h % uint64(nChecks))
	return check, int((h >> 8) % uint64(len(simChecks[check].reasons)))
}

// nodeHealth is a node's health plugin: the state of its checks as of
// check run run.
type nodeHealth struct {
	f                   *Faults
	d                   *healthDescs
	idx                 int
	run                 int64
	fail, reason        int // failing check and reason index, -1: none
	dur, failed, tmouts [nChecks]float64
}

// SetFaults makes the node run the simulated health checks of f's
// schedule (its index i in the cluster, counting from 0).
func (n *Node) SetFaults(f *Faults, i int) {
	if f == nil || !f.o.Health {
		n.health = nil
		return
	}
	n.health = &nodeHealth{f: f, d: n.sch.health, idx: i, run: math.MinInt64, fail: -1, reason: -1}
}

// healthSeries adds the health plugin's series at t: each check's result
// as of its last run, and the failure series of the one failing.
func (n *Node) healthSeries(t time.Time, b *metric.Batch) {
	h := n.health
	f := h.f
	k := f.step(t)
	r := k / f.checkEvery
	if k < 0 && k%f.checkEvery != 0 {
		r-- // floor
	}
	if r != h.run {
		h.run = r
		h.fail, h.reason = f.failing(h.idx, r)
		for c := range simChecks {
			// Durations jitter from run to run.
			u := float64(f.hash(uint64(100+c), uint64(r), uint64(h.idx))>>11) / (1 << 53)
			h.dur[c] = math.Round(simChecks[c].base*(0.6+0.8*u)*1e6) / 1e6
		}
		if c := h.fail; c >= 0 {
			h.failed[c]++
			if simChecks[c].reasons[h.reason] == timeoutReason {
				h.tmouts[c]++
				h.dur[c] = timeoutSeconds
			} else {
				h.dur[c] *= 3 // a failing check tends to take longer
			}
		}
	}
	d := h.d
	for c := range simChecks {
		ok := 1.0
		if c == h.fail {
			ok = 0
		}
		b.Add(d.ok[c], ok)
		b.Add(d.dur[c], h.dur[c])
		b.Add(d.failed[c], h.failed[c])
		b.Add(d.timeouts[c], h.tmouts[c])
	}
	if c := h.fail; c >= 0 {
		b.Add(d.failure[c][h.reason], 1)
	}
}
