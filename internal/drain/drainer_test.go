package drain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-hpc/vigil/internal/events"
)

// fakeSlurm is a Scheduler keeping its nodes' state in memory, as
// scontrol would show it.
type fakeSlurm struct {
	mu    sync.Mutex
	nodes map[string]NodeInfo
	calls []string
	fail  map[string]int // op: fail this many more calls
}

func newFakeSlurm(nodes ...string) *fakeSlurm {
	s := &fakeSlurm{nodes: map[string]NodeInfo{}, fail: map[string]int{}}
	for _, n := range nodes {
		s.nodes[n] = NodeInfo{State: "IDLE"}
	}
	return s
}

func (s *fakeSlurm) call(op, node string) (NodeInfo, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op != opShow {
		s.calls = append(s.calls, op+" "+node)
	}
	if s.fail[op] > 0 {
		s.fail[op]--
		return NodeInfo{}, false, fmt.Errorf("scontrol %s: no answer within 10s", op)
	}
	info, ok := s.nodes[node]
	return info, ok, nil
}

func (s *fakeSlurm) Node(_ context.Context, name string) (NodeInfo, error) {
	info, ok, err := s.call(opShow, name)
	if err == nil && !ok {
		err = ErrNoNode
	}
	return info, err
}

func (s *fakeSlurm) Drain(_ context.Context, name, reason string) error {
	if _, _, err := s.call(opDrain, name); err != nil {
		return err
	}
	s.set(name, NodeInfo{State: "IDLE+DRAIN", Reason: reason})
	return nil
}

func (s *fakeSlurm) Resume(_ context.Context, name string) error {
	if _, _, err := s.call(opResume, name); err != nil {
		return err
	}
	s.set(name, NodeInfo{State: "IDLE"})
	return nil
}

func (s *fakeSlurm) set(name string, i NodeInfo) {
	s.mu.Lock()
	s.nodes[name] = i
	s.mu.Unlock()
}

func (s *fakeSlurm) get(name string) NodeInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[name]
}

func (s *fakeSlurm) takeCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// running starts m.Run until the test ends (then waits for it).
func running(t *testing.T, m *Manager) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("5 s and still not: %s", what)
		}
	}
}

// settle gives the drainer time to act on what it was told (it acts
// within milliseconds), for the checks that nothing happened.
func settle(m *Manager) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		m.drainer.mu.Lock()
		idle := len(m.drainer.pending) == 0
		m.drainer.mu.Unlock()
		if idle {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
}

// TestDrainResume: a failing node is drained once with Vigil's reason,
// more failing ticks do nothing, and once every check passes it is
// resumed, once.
func TestDrainResume(t *testing.T) {
	sl := newFakeSlurm("cn12")
	reg := prometheus.NewRegistry()
	m, rec := newManager(t, Options{Dir: t.TempDir(), Scheduler: sl, Registerer: reg})
	running(t, m)
	n := newFakeNode("cn12", 2, "scratch_rw", "munge")
	n.tick(m, true)
	settle(m)
	n.tick(m, n.set("scratch_rw", "read-only", true))
	n.tick(m, n.set("munge", "not running", true))
	waitUntil(t, "cn12 drained", func() bool { return sl.get("cn12").Drained() })
	// The event follows the scheduler's command: wait for it too, so the
	// passes below come after it.
	waitUntil(t, "the drain event", func() bool { return rec.has(events.KindDrain) })
	if r := sl.get("cn12").Reason; r != "vigil: scratch_rw: read-only" {
		t.Fatalf("reason %q", r)
	}
	for range 5 {
		n.tick(m, false)
	}
	n.tick(m, n.set("scratch_rw", "", false)) // munge still fails
	settle(m)
	if c := sl.takeCalls(); len(c) != 1 || c[0] != "drain cn12" {
		t.Fatalf("scheduler calls %q, want one drain", c)
	}
	n.tick(m, n.set("munge", "", false))
	waitUntil(t, "cn12 resumed", func() bool { return !sl.get("cn12").Drained() })
	waitUntil(t, "the resume event", func() bool { return rec.has(events.KindResume) })
	n.tick(m, false)
	settle(m)
	if c := sl.takeCalls(); len(c) != 1 || c[0] != "resume cn12" {
		t.Fatalf("scheduler calls %q, want one resume", c)
	}
	// The drain runs beside the ticks, so it may come before the second
	// failure; the resume comes after both passes.
	var kinds []string
	count := map[string]int{}
	for _, e := range rec.take() {
		kinds = append(kinds, e.Kind)
		count[e.Kind]++
	}
	if len(kinds) != 6 || kinds[0] != events.KindHealthFail || kinds[5] != events.KindResume || count[events.KindHealthFail] != 2 ||
		count[events.KindDrain] != 1 || count[events.KindHealthPass] != 2 || strings.Join(kinds[3:5], " ") != "health_pass health_pass" {
		t.Errorf("events %v, want 2 health_fail and a drain, then 2 health_pass and a resume", kinds)
	}
	if d := testutil.ToFloat64(m.m.actions.WithLabelValues(opDrain)); d != 1 {
		t.Errorf("vigil_drain_actions_total{op=drain} = %v", d)
	}
	if r := testutil.ToFloat64(m.m.actions.WithLabelValues(opResume)); r != 1 {
		t.Errorf("vigil_drain_actions_total{op=resume} = %v", r)
	}
	if len(m.Drained()) != 0 {
		t.Errorf("Drained() = %v after the resume", m.Drained())
	}
}

// TestAdminDrainWins: a node someone else drained is never drained over
// nor resumed by Vigil; a node Vigil drained and an admin re-drained with
// their own reason stays drained when its checks pass.
func TestAdminDrainWins(t *testing.T) {
	sl := newFakeSlurm("cn1", "cn2")
	sl.set("cn2", NodeInfo{State: "IDLE+DRAIN", Reason: "admin: bad dimm"})
	m, _ := newManager(t, Options{Scheduler: sl})
	running(t, m)
	n2 := newFakeNode("cn2", 0, "a")
	n2.tick(m, n2.set("a", "bad", true))
	settle(m)
	n2.tick(m, n2.set("a", "", false))
	settle(m)
	if c := sl.takeCalls(); len(c) != 0 {
		t.Fatalf("scheduler calls %q on an admin-drained node", c)
	}
	if i := sl.get("cn2"); i.Reason != "admin: bad dimm" || !i.Drained() {
		t.Fatalf("cn2 %+v", i)
	}

	n1 := newFakeNode("cn1", 0, "a")
	n1.tick(m, n1.set("a", "bad", true))
	waitUntil(t, "cn1 drained", func() bool { return sl.get("cn1").Drained() })
	sl.set("cn1", NodeInfo{State: "IDLE+DRAIN", Reason: "admin: replace the disk"})
	n1.tick(m, n1.set("a", "", false))
	waitUntil(t, "cn1 forgotten", func() bool { return len(m.Drained()) == 0 })
	settle(m)
	if c := sl.takeCalls(); len(c) != 1 || c[0] != "drain cn1" {
		t.Fatalf("scheduler calls %q, want only the drain", c)
	}
	if i := sl.get("cn1"); i.Reason != "admin: replace the disk" || !i.Drained() {
		t.Fatalf("cn1 %+v", i)
	}
}

// TestRestartRemembers: a manager started again on the same directory
// knows the nodes it drained and their failing checks: still failing
// makes no new event nor drain; passing resumes.
func TestRestartRemembers(t *testing.T) {
	dir := t.TempDir()
	sl := newFakeSlurm("cn1", "cn2")
	m, _ := newManager(t, Options{Dir: dir, Scheduler: sl})
	stop := running(t, m)
	n1, n2 := newFakeNode("cn1", 0, "a"), newFakeNode("cn2", 0, "a")
	n1.tick(m, n1.set("a", "bad", true))
	n2.tick(m, n2.set("a", "worse", true))
	waitUntil(t, "both drained", func() bool { return sl.get("cn1").Drained() && sl.get("cn2").Drained() })
	waitUntil(t, "both on record", func() bool { return len(m.Drained()) == 2 })
	stop()
	sl.takeCalls()

	m2, rec := newManager(t, Options{Dir: dir, Scheduler: sl})
	if d := m2.Drained(); len(d) != 2 || d["cn1"].Reason != "vigil: a: bad" {
		t.Fatalf("restarted: Drained() = %+v", d)
	}
	if f := m2.Failing("cn2"); len(f) != 1 || f[0].Reason != "worse" {
		t.Fatalf("restarted: Failing(cn2) = %+v", f)
	}
	running(t, m2)
	settle(m2)
	if c := sl.takeCalls(); len(c) != 0 {
		t.Fatalf("restarted, nodes not heard yet: scheduler calls %q", c)
	}
	n1.tick(m2, true) // still failing
	n2.tick(m2, n2.set("a", "", false))
	waitUntil(t, "cn2 resumed", func() bool { return !sl.get("cn2").Drained() })
	settle(m2)
	if c := sl.takeCalls(); len(c) != 1 || c[0] != "resume cn2" {
		t.Fatalf("scheduler calls %q, want cn2's resume", c)
	}
	ev := rec.take()
	if len(ev) != 2 || ev[0].Kind != events.KindHealthPass || ev[0].Node != "cn2" || ev[1].Kind != events.KindResume {
		t.Fatalf("events after the restart %+v, want cn2's pass and resume", ev)
	}
}

// TestSchedulerErrors: a command that fails is counted and tried again
// later; a node the scheduler does not know is left alone.
func TestSchedulerErrors(t *testing.T) {
	sl := newFakeSlurm("cn1")
	sl.fail[opDrain] = 2
	m, _ := newManager(t, Options{Scheduler: sl, Retry: 20 * time.Millisecond})
	running(t, m)
	n := newFakeNode("cn1", 0, "a")
	n.tick(m, n.set("a", "bad", true))
	waitUntil(t, "cn1 drained", func() bool { return sl.get("cn1").Drained() })
	if e := testutil.ToFloat64(m.m.errors.WithLabelValues(opDrain)); e != 2 {
		t.Errorf("vigil_drain_errors_total{op=drain} = %v, want 2", e)
	}
	if c := sl.takeCalls(); len(c) != 3 {
		t.Errorf("scheduler calls %q, want 3 drains", c)
	}
	x := newFakeNode("login1", 0, "a")
	x.tick(m, x.set("a", "bad", true))
	bad := newFakeNode("cn[1-100]", 0, "a")
	bad.tick(m, bad.set("a", "bad", true))
	settle(m)
	time.Sleep(50 * time.Millisecond) // past Retry: nothing is retried
	if c := sl.takeCalls(); len(c) != 0 {
		t.Errorf("scheduler calls %q for nodes not Slurm's", c)
	}
}

func TestParseNode(t *testing.T) {
	const line = "NodeName=cn1 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.80 OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=2048 State=IDLE+DRAIN ThreadsPerCore=1 Partitions=test  ExtSensorsTemp=n/s Reason=vigil: scratch_rw: \"touch\" failed; x=y Weight=5 [root@2026-11-25T17:57:09]\n"
	i, err := parseNode([]byte(line), "cn1")
	if err != nil || i.State != "IDLE+DRAIN" || !i.Drained() || i.Reason != `vigil: scratch_rw: "touch" failed; x=y Weight=5` {
		t.Fatalf("%+v, %v", i, err)
	}
	i, err = parseNode([]byte("NodeName=cn1 Arch=x86_64 State=IDLE+NOT_RESPONDING ThreadsPerCore=1\n"), "cn1")
	if err != nil || i.Drained() || i.Reason != "" {
		t.Fatalf("%+v, %v", i, err)
	}
	for _, bad := range []string{"", "NodeName=cn2 State=IDLE", "NodeName=cn1 Arch=x"} {
		if _, err := parseNode([]byte(bad), "cn1"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if !(NodeInfo{State: "MIXED+DRAIN"}).Drained() || (NodeInfo{State: "DOWN"}).Drained() {
		t.Error("Drained")
	}
}

// TestBadStateFile: an unreadable state file is moved aside and the
// manager starts without it.
func TestBadStateFile(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/"+StateFile, []byte("{\"drained\": [")); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Drained()) != 0 || len(m.AllFailing()) != 0 {
		t.Fatalf("state from a broken file: %v %v", m.Drained(), m.AllFailing())
	}
	if b, err := os.ReadFile(dir + "/" + StateFile + ".bad"); err != nil || string(b) != "{\"drained\": [" {
		t.Fatalf("moved aside: %q, %v", b, err)
	}
	if _, err := os.Stat(dir + "/" + StateFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the broken file is still there: %v", err)
	}
}
