package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	randv2 "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// The tree tests put real vigil processes between an in-test top (a wire
// server recording everything that reaches it) and real senders, then break
// things: kill -9, wrong keys, garbage on the socket.

// recorder is the top of the tree. Ticks are keyed by (node, stream's first
// series, timestamp), so a tick stored twice is seen, and its values are
// hashed, so "twice with different values" can be told apart.
type recorder struct {
	mu      sync.Mutex
	ticks   map[string]map[tickKey]delivery
	dupSame int
	dupDiff int
	dups    []string
	gaps    map[string][][2]time.Time
	states  []stateChange
}

type tickKey struct {
	first string
	t     int64
}

type delivery struct {
	sum uint64
	via string
	at  time.Time // arrival at the top
}

type stateChange struct {
	node string
	up   bool
	t    time.Time
	at   time.Time
}

func newRecorder() *recorder {
	return &recorder{ticks: map[string]map[tickKey]delivery{}, gaps: map[string][][2]time.Time{}}
}

// via is one listener of the top; the name tells which aggregator sent a tick.
type via struct {
	wire.NopHandler
	r    *recorder
	name string
}

func (v via) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) {
	h := fnv.New64a()
	var b [8]byte
	for _, x := range values {
		bits := math.Float64bits(x)
		for i := range b {
			b[i] = byte(bits >> (8 * i))
		}
		h.Write(b[:])
	}
	k := tickKey{t: t.UnixNano()}
	if len(descs) > 0 {
		k.first = descs[0].Name
	}
	d := delivery{sum: h.Sum64(), via: v.name, at: time.Now()}
	r := v.r
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.ticks[node]
	if m == nil {
		m = map[tickKey]delivery{}
		r.ticks[node] = m
	}
	if old, ok := m[k]; ok {
		if old.sum == d.sum {
			r.dupSame++
		} else {
			r.dupDiff++
		}
		r.dups = append(r.dups, fmt.Sprintf("%s@%s via %s then %s", node, t.Format("15:04:05.000"), old.via, v.name))
		return
	}
	m[k] = d
}

func (v via) Gap(node string, from, to time.Time) {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	v.r.gaps[node] = append(v.r.gaps[node], [2]time.Time{from, to})
}

func (v via) NodeState(node string, up bool, t time.Time) {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	v.r.states = append(v.r.states, stateChange{node, up, t, time.Now()})
}

// count returns how many distinct ticks of node arrived, in total and via
// the named listener after the given wall time.
func (r *recorder) count(node, through string, after time.Time) (all, since int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.ticks[node] {
		all++
		if (through == "" || d.via == through) && d.at.After(after) {
			since++
		}
	}
	return all, since
}

// firstArrival is the earliest arrival via the listener after the wall time.
func (r *recorder) firstArrival(node, through string, after time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var first time.Time
	for _, d := range r.ticks[node] {
		if d.via == through && d.at.After(after) && (first.IsZero() || d.at.Before(first)) {
			first = d.at
		}
	}
	return first, !first.IsZero()
}

// stateAfter returns the arrival of the first state change of node to up
// after the wall time.
func (r *recorder) stateAfter(node string, up bool, after time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.states {
		if s.node == node && s.up == up && s.at.After(after) {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// holes lists the timestamps in [from, to] that are on node's tick grid
// (anchored at a delivered tick, step iv) but were neither delivered nor
// covered by a Gap.
func (r *recorder) holes(node string, iv time.Duration, from, to time.Time) (holes []time.Time, checked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	have := map[int64]bool{}
	var anchor int64 = math.MinInt64
	for k := range r.ticks[node] {
		have[k.t] = true
		if anchor == math.MinInt64 || k.t < anchor {
			anchor = k.t
		}
	}
	if anchor == math.MinInt64 {
		return nil, 0
	}
	step := int64(iv)
	start := anchor + (from.UnixNano()-anchor+step-1)/step*step
	if start < anchor {
		start = anchor
	}
	for ts := start; ts <= to.UnixNano(); ts += step {
		checked++
		if have[ts] {
			continue
		}
		covered := false
		for _, g := range r.gaps[node] {
			if ts >= g[0].UnixNano() && ts <= g[1].UnixNano() {
				covered = true
				break
			}
		}
		if !covered {
			holes = append(holes, time.Unix(0, ts))
		}
	}
	return holes, checked
}

// span is the range of delivered tick timestamps of node.
func (r *recorder) span(node string) (first, last time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.ticks[node] {
		t := time.Unix(0, k.t)
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// serveTop starts a listener of the top recording into r under name.
func serveTop(t *testing.T, r *recorder, name string, key []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		_ = wire.Serve(ctx, ln, wire.ServerOptions{Key: key, Name: "top-" + name, Log: log}, via{r: r, name: name})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// proc is a vigil child process killed with SIGKILL at cleanup at the latest.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *testutil.SyncBuffer
	done   chan struct{}
}

func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: vigil(t, args...), stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill9()
		if t.Failed() {
			t.Logf("%s stderr (tail):\n%s", name, tail(p.stderr.String(), 3000))
		}
	})
	return p
}

func (p *proc) kill9() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// aggregator is a running `vigil aggregator` with its addresses.
type aggregatorProc struct {
	*proc
	listen, http string
}

func startAggregator(t *testing.T, name, upstream string, extra ...string) *aggregatorProc {
	t.Helper()
	a := &aggregatorProc{listen: freePort(t), http: freePort(t)}
	args := append([]string{"aggregator", "--name", name, "--listen", a.listen, "--upstream", upstream,
		"--http", a.http, "--interval", "200ms"}, extra...)
	a.proc = start(t, name, args...)
	waitUntil(t, name+" /metrics", 15*time.Second, func() bool {
		_, err := a.metric("vigil_aggregator_children_up")
		return err == nil
	})
	return a
}

// metric reads one of the aggregator's own series from its /metrics.
func (a *aggregatorProc) metric(name string) (float64, error) {
	body, err := scrape("http://" + a.http + "/metrics")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			i := strings.LastIndexByte(line, ' ')
			return strconv.ParseFloat(line[i+1:], 64)
		}
	}
	return 0, fmt.Errorf("%s not in /metrics of %s", name, a.name)
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for !cond() {
		if time.Since(t0) > d {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(t0)
}

func simNodes(first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cn%05d", first+i)
	}
	return out
}

// TestE2EFailover kills the aggregator a simulated rack streams through and
// checks that the rack moves to the second one losing nothing: the ticks
// A took but never passed on are sent again through B, so there is no
// hole and no gap. A tick A did pass on may come again through B, with
// the same values (the store takes such a copy as stored once).
func TestE2EFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const iv = 200 * time.Millisecond
	r := newRecorder()
	a := startAggregator(t, "aggA", serveTop(t, r, "A", nil))
	b := startAggregator(t, "aggB", serveTop(t, r, "B", nil))
	start(t, "simulate", "simulate", "--nodes", "50", "--interval", iv.String(), "--cpus", "4",
		"--group-size", "10", "--upstream", a.listen+","+b.listen)
	nodes := simNodes(1, 50)
	t0 := time.Now()
	waitUntil(t, "all 50 nodes flowing through A", 20*time.Second, func() bool {
		for _, n := range nodes {
			if _, since := r.count(n, "A", t0); since < 3 {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second)
	if _, viaB := r.count("cn00001", "B", time.Time{}); viaB > 0 {
		t.Fatalf("B carried %d ticks before the failure; the simulator should prefer A", viaB)
	}

	a.kill9()
	killed := time.Now()
	var failover time.Duration
	waitUntil(t, "all 50 nodes arriving through B", 15*time.Second, func() bool {
		failover = 0
		for _, n := range nodes {
			at, ok := r.firstArrival(n, "B", killed)
			if !ok {
				return false
			}
			failover = max(failover, at.Sub(killed))
		}
		return true
	})
	t.Logf("failover: every node's data arriving through B %v after kill -9 of A", failover.Round(time.Millisecond))
	if failover > 5*time.Second {
		t.Errorf("failover took %v, want within 5s", failover)
	}
	// Let B carry a few more ticks, then look at the window around the kill.
	time.Sleep(5 * iv)
	settled := time.Now()
	time.Sleep(5 * iv) // ticks up to settled have arrived by now
	r.mu.Lock()
	dupSame, dupDiff, dups := r.dupSame, r.dupDiff, append([]string(nil), r.dups...)
	r.mu.Unlock()
	if dupDiff > 0 {
		t.Errorf("%d ticks delivered twice with different values: %v", dupDiff, dups)
	}
	t.Logf("%d ticks delivered again with the same values", dupSame)
	totalHoles, checked, gapped, bad := 0, 0, 0, 0
	for _, n := range nodes {
		h, c := r.holes(n, iv, killed.Add(-2*time.Second), settled)
		checked += c
		if len(h) > 0 {
			totalHoles += len(h)
			if bad++; bad <= 5 {
				t.Errorf("%s: %d ticks neither delivered nor reported as a gap: %v", n, len(h), h)
			}
		}
		r.mu.Lock()
		gapped += len(r.gaps[n])
		r.mu.Unlock()
	}
	t.Logf("window around the kill: %d node ticks checked, %d unaccounted, %d gap records", checked, totalHoles, gapped)
	if gapped > 0 {
		t.Errorf("%d gap records, want none: every tick not acknowledged goes again", gapped)
	}
	if checked < 50*10 {
		t.Errorf("only %d node ticks in the window; the check saw too little", checked)
	}
}

// TestE2EKill9Sampler kills a real sampler and checks the node is reported
// down at the top and on the aggregator's /metrics, then up again after a
// restart.
func TestE2EKill9Sampler(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const iv = 200 * time.Millisecond
	r := newRecorder()
	agg := startAggregator(t, "agg1", serveTop(t, r, "top", nil))
	args := []string{"sampler", "--root", "testdata/node1", "--plugins", "cpu,memory,load", "--interval", iv.String(),
		"--upstream", agg.listen, "--listen", "none", "--node", "s1"}
	s := start(t, "sampler", args...)
	t0 := time.Now()
	waitUntil(t, "s1 ticks at the top and up on the aggregator", 15*time.Second, func() bool {
		_, n := r.count("s1", "", t0)
		up, err := agg.metric("vigil_aggregator_children_up")
		return n >= 3 && err == nil && up == 1
	})
	if _, ok := r.stateAfter("s1", true, t0); !ok {
		t.Error("no NodeState up for s1 reached the top")
	}
	time.Sleep(10 * iv) // its writes, two ticks each, must not look like silence
	if _, ok := r.stateAfter("s1", false, t0); ok {
		t.Fatal("s1 reported down while it was running")
	}

	s.kill9()
	killed := time.Now()
	gone := waitUntil(t, "children_up 0 on the aggregator", 10*time.Second, func() bool {
		up, err := agg.metric("vigil_aggregator_children_up")
		return err == nil && up == 0
	})
	var downAt time.Time
	waitUntil(t, "NodeState down for s1 at the top", 10*time.Second, func() bool {
		var ok bool
		downAt, ok = r.stateAfter("s1", false, killed)
		return ok
	})
	down := downAt.Sub(killed)
	t.Logf("after kill -9: down at the top in %v, children_up 0 in %v (interval %v)",
		down.Round(time.Millisecond), gone.Round(time.Millisecond), iv)
	if limit := 3*iv + time.Second; down > limit || gone > limit {
		t.Errorf("down reported after %v (top) / %v (/metrics), want within %v", down, gone, limit)
	}
	// The last write can precede the kill by up to two intervals: with
	// ticks this close (under --upstream-delay) every other tick waits for
	// the next to share its write.
	if down < 3*iv-2*iv {
		t.Errorf("down reported %v after the kill, before 3 intervals of silence could have passed", down)
	}

	start(t, "sampler (restarted)", args...)
	restarted := time.Now()
	back := waitUntil(t, "children_up 1 again", 10*time.Second, func() bool {
		up, err := agg.metric("vigil_aggregator_children_up")
		return err == nil && up == 1
	})
	var upAt time.Time
	waitUntil(t, "NodeState up for s1 at the top", 10*time.Second, func() bool {
		var ok bool
		upAt, ok = r.stateAfter("s1", true, restarted)
		return ok
	})
	upTop := upAt.Sub(restarted)
	t.Logf("after restart: up at the top in %v, children_up 1 in %v (includes process start)",
		upTop.Round(time.Millisecond), back.Round(time.Millisecond))
	if limit := 2*iv + 1500*time.Millisecond; upTop > limit || back > limit {
		t.Errorf("up again after %v (top) / %v (/metrics), want within %v", upTop, back, limit)
	}
}

func writeKey(t *testing.T, dir, name string) string {
	t.Helper()
	k := make([]byte, 24)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestE2EAuth: with a key set, only senders holding it get through; a wrong
// key and no key (even from loopback) are refused and logged.
func TestE2EAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	dir := t.TempDir()
	keyFile := writeKey(t, dir, "cluster.key")
	otherKey := writeKey(t, dir, "other.key")
	key, err := wire.LoadKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	agg := startAggregator(t, "aggK", serveTop(t, r, "top", key), "--key", keyFile)
	sim := func(first int, extra ...string) *proc {
		args := append([]string{"simulate", "--nodes", "2", "--first", strconv.Itoa(first), "--interval", "200ms",
			"--cpus", "1", "--upstream", agg.listen}, extra...)
		return start(t, fmt.Sprintf("simulate cn%05d", first), args...)
	}
	sim(1, "--key", keyFile)
	wrong := sim(101, "--key", otherKey)
	none := sim(201)

	t0 := time.Time{}
	waitUntil(t, "keyed nodes at the top", 15*time.Second, func() bool {
		_, a := r.count("cn00001", "", t0)
		_, b := r.count("cn00002", "", t0)
		return a >= 3 && b >= 3
	})
	log := func() string { return agg.stderr.String() }
	refusedLogged := func(peer string) bool {
		for _, line := range strings.Split(log(), "\n") {
			if strings.Contains(line, "peer failed authentication") && strings.Contains(line, peer) {
				return true
			}
		}
		return false
	}
	waitUntil(t, "both refusals logged by the aggregator", 15*time.Second, func() bool {
		return refusedLogged("simulate/cn00101") && refusedLogged("simulate/cn00201")
	})
	fails, err := agg.metric("vigil_aggregator_auth_failures_total")
	if err != nil || fails < 2 {
		t.Errorf("vigil_aggregator_auth_failures_total = %v (%v), want at least 2", fails, err)
	}
	time.Sleep(time.Second) // time for anything that slipped through to arrive
	for _, n := range append(simNodes(101, 2), simNodes(201, 2)...) {
		if all, _ := r.count(n, "", t0); all > 0 {
			t.Errorf("%s: %d ticks reached the top without the right key", n, all)
		}
	}
	// The refused senders say why, so an admin can fix it from their side.
	for _, p := range []*proc{wrong, none} {
		if s := p.stderr.String(); !strings.Contains(s, "authentication") {
			t.Errorf("%s does not log the refusal:\n%s", p.name, tail(s, 1000))
		}
	}
}

// vmRSS is a process's resident set in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// garbage opens n connections at once, each sending up to 64 KiB of random
// bytes, and returns how many were closed by the far end (not by a timeout).
func garbage(addr string, n int, seed uint64) (closed int) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			rng := randv2.New(randv2.NewPCG(seed, uint64(i)))
			buf := make([]byte, 4096)
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			for sent := 0; sent < 64<<10; sent += len(buf) {
				for j := range buf {
					buf[j] = byte(rng.Uint32())
				}
				if _, err := c.Write(buf); err != nil {
					break
				}
			}
			// A forged length may leave the server waiting for a body;
			// ending our side turns that into a truncated frame.
			_ = c.(*net.TCPConn).CloseWrite()
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return
			}
			mu.Lock()
			closed++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return closed
}

// TestE2EGarbageClient sends random bytes on 2×200 connections while a
// simulated rack streams through the same aggregator.
func TestE2EGarbageClient(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const iv = 200 * time.Millisecond
	r := newRecorder()
	agg := startAggregator(t, "aggG", serveTop(t, r, "top", nil), "--log-level", "error")
	start(t, "simulate", "simulate", "--nodes", "20", "--interval", iv.String(), "--cpus", "4",
		"--upstream", agg.listen)
	nodes := simNodes(1, 20)
	waitUntil(t, "20 nodes flowing", 15*time.Second, func() bool {
		for _, n := range nodes {
			if all, _ := r.count(n, "", time.Time{}); all < 3 {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second)
	pid := agg.cmd.Process.Pid
	// Each garbage connection is closed for its bytes or, past the cap on
	// handshakes from one address, refused on accepting.
	closedFor := func() (float64, error) {
		pe, err := agg.metric("vigil_aggregator_protocol_errors_total")
		ref, err2 := agg.metric("vigil_aggregator_refused_total")
		return pe + ref, errors.Join(err, err2)
	}
	pe0, err := closedFor()
	if err != nil {
		t.Fatal(err)
	}
	rss0 := vmRSS(t, pid)
	g0 := time.Now()
	const conns = 200
	var rss [2]int64
	for round := range 2 {
		if closed := garbage(agg.listen, conns, uint64(round)); closed != conns {
			t.Errorf("round %d: %d of %d garbage connections closed by the aggregator", round, closed, conns)
		}
		rss[round] = vmRSS(t, pid)
	}
	g1 := time.Now()
	var pe float64
	waitUntil(t, "protocol errors counted", 10*time.Second, func() bool {
		pe, err = closedFor()
		return err == nil && pe-pe0 >= 2*conns
	})
	if pe-pe0 != 2*conns {
		t.Errorf("protocol errors and refusals rose by %v for %d garbage connections", pe-pe0, 2*conns)
	}
	t.Logf("aggregator RSS: %.1f MiB before, %.1f MiB after %d garbage connections, %.1f MiB after %d more",
		float64(rss0)/(1<<20), float64(rss[0])/(1<<20), conns, float64(rss[1])/(1<<20), conns)
	switch {
	case testutil.RaceEnabled:
		// The race detector's shadow memory makes RSS say little.
	case rss[0]-rss0 > 128<<20:
		t.Errorf("RSS grew by %d MiB for %d connections", (rss[0]-rss0)>>20, conns)
	case rss[1]-rss[0] > 24<<20:
		// The first round sizes the heap; a second one fits in it, give
		// or take what the runtime has not yet returned to the kernel.
		t.Errorf("RSS grew by another %d MiB in a second round: per-connection memory is kept", (rss[1]-rss[0])>>20)
	}
	// The rack went on: every tick from before to after the garbage arrived
	// and none was lost.
	time.Sleep(3 * iv)
	for _, n := range nodes {
		if h, c := r.holes(n, iv, g0.Add(-time.Second), g1); len(h) > 0 || c < int((g1.Sub(g0)+time.Second)/iv)-1 {
			t.Errorf("%s: %d of %d ticks missing while garbage was sent", n, len(h), c)
		}
		if _, last := r.span(n); last.Before(g1) {
			t.Errorf("%s: last tick %v, before the garbage ended (%v)", n, last, g1)
		}
		r.mu.Lock()
		if g := r.gaps[n]; len(g) > 0 {
			t.Errorf("%s: gaps %v while garbage was sent", n, g)
		}
		r.mu.Unlock()
	}
}

// TestE2EFailoverMidTick kills A while a 1,000-node tick is passing through
// it. Ticks the simulator had already written to A's socket but A never
// acknowledged must come back as Gap records (the wire protocol's Ack).
func TestE2EFailoverMidTick(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	const iv = time.Second
	r := newRecorder()
	a := startAggregator(t, "aggA", serveTop(t, r, "A", nil))
	b := startAggregator(t, "aggB", serveTop(t, r, "B", nil))
	start(t, "simulate", "simulate", "--nodes", "1000", "--interval", iv.String(), "--upstream", a.listen+","+b.listen)
	nodes := simNodes(1, 1000)
	waitUntil(t, "1000 nodes flowing through A", 30*time.Second, func() bool {
		for _, n := range nodes {
			if all, _ := r.count(n, "A", time.Time{}); all < 2 {
				return false
			}
		}
		return true
	})
	// 15ms after a tick boundary the tick is being sampled, encoded and
	// forwarded.
	time.Sleep(time.Until(time.Now().Truncate(iv).Add(iv + 15*time.Millisecond)))
	a.kill9()
	killed := time.Now()
	time.Sleep(4 * iv)
	holes, hit := 0, 0
	for _, n := range nodes {
		h, _ := r.holes(n, iv, killed.Add(-2*iv), killed.Add(2*iv))
		holes += len(h)
		if len(h) > 0 {
			if hit++; hit <= 3 {
				t.Errorf("%s: ticks %v neither delivered nor reported as a gap", n, h)
			}
		}
	}
	if holes > 0 {
		t.Errorf("%d ticks on %d nodes lost silently around the kill", holes, hit)
	}
}
