package drain

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// recorder is an events.Sink keeping what it is given.
type recorder struct {
	mu sync.Mutex
	ev []events.Event
}

func (r *recorder) Emit(e events.Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

// has tells whether an event of kind was emitted (and not yet taken).
func (r *recorder) has(kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.ev {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

func (r *recorder) take() []events.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.ev
	r.ev = nil
	return ev
}

// node streams one node's ticks as the health plugin would: the other
// series, then vigil_health_check_ok per check and, for each failing
// check, vigil_health_check_failure{reason}. A new failure or reason
// makes a new schema, as on the wire.
type fakeNode struct {
	name   string
	other  []*metric.Desc
	checks []string
	oks    map[string]*metric.Desc
	fails  map[string]*metric.Desc // current failure series by check
	descs  []*metric.Desc
	values []float64
	t      time.Time
}

func newFakeNode(name string, others int, checks ...string) *fakeNode {
	f := &fakeNode{name: name, checks: checks, oks: map[string]*metric.Desc{}, fails: map[string]*metric.Desc{}, t: time.Unix(1_700_000_000, 0)}
	for i := range others {
		f.other = append(f.other, metric.NewDesc("node_x"+strconv.Itoa(i), "", metric.Gauge))
	}
	for _, c := range checks {
		f.oks[c] = metric.NewDesc(okMetric, "", metric.Gauge, "check", c)
	}
	return f
}

// set makes check fail with reason, or pass (reason ""); it reports
// whether the schema changed.
func (f *fakeNode) set(check, reason string, failing bool) bool {
	old := f.fails[check]
	if !failing {
		delete(f.fails, check)
		return old != nil
	}
	if old != nil && old.Labels[1].Value == reason {
		return false
	}
	f.fails[check] = metric.NewDesc(failureMetric, "", metric.Gauge, "check", check, "reason", reason)
	return true
}

// tick feeds one tick to m (Schema first when the series changed).
func (f *fakeNode) tick(m *Manager, schema bool) {
	f.t = f.t.Add(time.Second)
	f.fill()
	if schema {
		m.Schema(f.name, f.descs)
	}
	m.Tick(f.name, f.t, f.descs, f.values)
}

// fill makes the tick's series and values.
func (f *fakeNode) fill() {
	f.descs, f.values = f.descs[:0], f.values[:0]
	for _, d := range f.other {
		f.descs = append(f.descs, d)
		f.values = append(f.values, 1)
	}
	for _, c := range f.checks {
		v := 1.0
		if f.fails[c] != nil {
			v = 0
		}
		f.descs = append(f.descs, f.oks[c])
		f.values = append(f.values, v)
	}
	for _, c := range f.checks {
		if d := f.fails[c]; d != nil {
			f.descs = append(f.descs, d)
			f.values = append(f.values, 1)
		}
	}
}

func newManager(t testing.TB, o Options) (*Manager, *recorder) {
	t.Helper()
	rec := &recorder{}
	o.Events = rec
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m, rec
}

// TestTapTransitions: a check that passes makes no event; its failure
// makes exactly one health_fail (with the reason), however long it
// lasts; a new reason while failing none; its pass exactly one
// health_pass. Failing lists the check while it fails.
func TestTapTransitions(t *testing.T) {
	m, rec := newManager(t, Options{})
	n := newFakeNode("cn12", 3, "scratch_rw", "munge")
	n.tick(m, true)
	n.tick(m, false)
	if ev := rec.take(); len(ev) != 0 {
		t.Fatalf("passing checks made events: %+v", ev)
	}
	n.tick(m, n.set("scratch_rw", "touch /scratch: read-only file system", true))
	failedAt := n.t
	for range 5 {
		n.tick(m, false)
	}
	ev := rec.take()
	if len(ev) != 1 {
		t.Fatalf("a failure made %d events, want 1: %+v", len(ev), ev)
	}
	e := ev[0]
	want := "cn12: check scratch_rw failed: touch /scratch: read-only file system"
	if e.Kind != events.KindHealthFail || e.Severity != events.SeverityCritical || e.Summary != want || e.Node != "cn12" ||
		e.Labels["check"] != "scratch_rw" || !e.Time.Equal(failedAt) {
		t.Fatalf("fail event %+v, want kind %s, critical, summary %q at %v", e, events.KindHealthFail, want, failedAt)
	}
	if k := m.failingNodes(); k != 1 {
		t.Fatalf("failingNodes = %d, want 1", k)
	}
	f := m.Failing("cn12")
	if len(f) != 1 || f[0].Check != "scratch_rw" || f[0].Reason != "touch /scratch: read-only file system" || !f[0].Since.Equal(failedAt) {
		t.Fatalf("Failing(cn12) = %+v", f)
	}
	n.tick(m, n.set("scratch_rw", "touch /scratch: no space left", true))
	n.tick(m, false)
	if ev := rec.take(); len(ev) != 0 {
		t.Fatalf("a new reason made events: %+v", ev)
	}
	if f := m.Failing("cn12"); len(f) != 1 || f[0].Reason != "touch /scratch: no space left" || !f[0].Since.Equal(failedAt) {
		t.Fatalf("Failing(cn12) after a new reason = %+v", f)
	}
	n.tick(m, n.set("scratch_rw", "", false))
	n.tick(m, false)
	ev = rec.take()
	if len(ev) != 1 || ev[0].Kind != events.KindHealthPass || ev[0].Severity != events.SeverityInfo || ev[0].Labels["check"] != "scratch_rw" {
		t.Fatalf("a pass made %+v, want one %s event", ev, events.KindHealthPass)
	}
	if f := m.Failing("cn12"); f != nil {
		t.Fatalf("Failing(cn12) after the pass = %+v", f)
	}
	if k := m.failingNodes(); k != 0 {
		t.Fatalf("failingNodes = %d", k)
	}
	if all := m.AllFailing(); len(all) != 0 {
		t.Fatalf("AllFailing = %+v", all)
	}
}

// TestTapNoHealthSeries: a stream without health series costs no
// allocation per tick and makes nothing; nor does a steady health stream.
func TestTapNoHealthSeries(t *testing.T) {
	m, rec := newManager(t, Options{})
	plain := newFakeNode("cn1", 50)
	plain.tick(m, true)
	if a := testing.AllocsPerRun(100, func() { plain.tick(m, false) }); a != 0 {
		t.Errorf("a tick without health series: %v allocations, want 0", a)
	}
	failing := newFakeNode("cn2", 50, "a", "b", "c")
	failing.tick(m, failing.set("b", "down", true))
	if a := testing.AllocsPerRun(100, func() { failing.tick(m, false) }); a != 0 {
		t.Errorf("a steady tick with health series: %v allocations, want 0", a)
	}
	if f := m.Failing("cn1"); f != nil {
		t.Errorf("Failing(cn1) = %+v", f)
	}
	if ev := rec.take(); len(ev) != 1 || ev[0].Node != "cn2" {
		t.Errorf("events: %+v, want cn2's one failure", ev)
	}
}

// TestTapHostileLabels: check names and reasons from the wire are
// bounded and made printable.
func TestTapHostileLabels(t *testing.T) {
	m, rec := newManager(t, Options{})
	long := make([]byte, 5000)
	for i := range long {
		long[i] = 'x'
	}
	long[3] = '\n'
	n := newFakeNode("cn3", 0, "c\x00k", string(long[:maxCheckName+1]))
	n.tick(m, n.set("c\x00k", string(long)+"\xff", true))
	n.tick(m, n.set(string(long[:maxCheckName+1]), "r", true))
	f := m.Failing("cn3")
	if len(f) != 1 || f[0].Check != "c k" || len(f[0].Reason) > maxReason || f[0].Reason[:4] != "xxx " {
		t.Fatalf("Failing(cn3) = %+v, want the one check with a short name, its reason cleaned and cut", f)
	}
	if ev := rec.take(); len(ev) != 1 {
		t.Fatalf("events: %+v", ev)
	}
}

// TestTapSweep: a failing check the node stops reporting while it goes
// on with others passes after checkGone; a silent node keeps its state.
func TestTapSweep(t *testing.T) {
	m, rec := newManager(t, Options{})
	n := newFakeNode("cn4", 0, "a", "b")
	n.tick(m, n.set("a", "bad", true))
	silent := newFakeNode("cn5", 0, "a")
	silent.tick(m, silent.set("a", "bad", true))
	rec.take()
	n.checks = []string{"b"}
	n.tick(m, true)
	n.t = n.t.Add(checkGone)
	n.tick(m, false)
	m.sweep()
	if f := m.Failing("cn4"); f != nil {
		t.Fatalf("a check no longer reported still fails: %+v", f)
	}
	if f := m.Failing("cn5"); len(f) != 1 {
		t.Fatalf("a silent node's failing check was dropped: %+v", f)
	}
	if ev := rec.take(); len(ev) != 1 || ev[0].Kind != events.KindHealthPass || ev[0].Node != "cn4" {
		t.Fatalf("events: %+v, want cn4's pass", ev)
	}

	// A node that goes on ticking without any health series (its health
	// plugin removed) has its failing checks dropped after healthGone.
	silent.checks = nil
	silent.fails = map[string]*metric.Desc{}
	silent.other = []*metric.Desc{metric.NewDesc("node_load1", "", metric.Gauge)}
	silent.tick(m, true)
	silent.t = silent.t.Add(healthGone - 2*time.Second)
	silent.tick(m, false)
	m.sweep()
	if f := m.Failing("cn5"); len(f) != 1 {
		t.Fatalf("dropped before healthGone: %+v", f)
	}
	silent.t = silent.t.Add(2 * time.Second)
	silent.tick(m, false)
	m.sweep()
	if f := m.Failing("cn5"); f != nil {
		t.Fatalf("a node without health series for %v still fails: %+v", healthGone, f)
	}
	if ev := rec.take(); len(ev) != 1 || ev[0].Kind != events.KindHealthPass || ev[0].Node != "cn5" {
		t.Fatalf("events: %+v, want cn5's pass", ev)
	}
}

// TestHealthAPI: GET /api/v1/health lists the failing nodes only.
func TestHealthAPI(t *testing.T) {
	m, _ := newManager(t, Options{})
	newFakeNode("ok1", 1, "a").tick(m, true)
	n := newFakeNode("cn1", 1, "x", "y")
	n.tick(m, n.set("x", "why", true))
	mux := http.NewServeMux()
	m.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Status string
		Data   struct {
			Nodes map[string][]struct{ Check, Reason, Since string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	c := v.Data.Nodes["cn1"]
	if v.Status != "success" || len(v.Data.Nodes) != 1 || len(c) != 1 || c[0].Check != "x" || c[0].Reason != "why" {
		t.Fatalf("answer %+v", v)
	}
	if _, err := time.Parse(time.RFC3339, c[0].Since); err != nil {
		t.Fatalf("since %q: %v", c[0].Since, err)
	}
}

// BenchmarkTick is the tap's cost per tick of a node whose stream holds
// 100 node series and 20 checks, one failing, over 20,000 nodes.
func BenchmarkTick(b *testing.B) {
	m, _ := newManager(b, Options{})
	nodes := make([]*fakeNode, 20000)
	for i := range nodes {
		nodes[i] = newFakeNode("cn"+strconv.Itoa(i), 100, checkNames(20)...)
		nodes[i].tick(m, nodes[i].set("c7", "bad", true))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n := nodes[i%len(nodes)]
		m.Tick(n.name, n.t, n.descs, n.values)
	}
}

// BenchmarkTickNoHealth is the same for a stream without health series.
func BenchmarkTickNoHealth(b *testing.B) {
	m, _ := newManager(b, Options{})
	nodes := make([]*fakeNode, 20000)
	for i := range nodes {
		nodes[i] = newFakeNode("cn"+strconv.Itoa(i), 120)
		nodes[i].tick(m, true)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n := nodes[i%len(nodes)]
		m.Tick(n.name, n.t, n.descs, n.values)
	}
}

func checkNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, "c"+strconv.Itoa(i))
	}
	return out
}

// BenchmarkTickWarm is BenchmarkTick on one node, its tick in the cache
// as it is in ingest (just decoded and stored): the tap's own work.
func BenchmarkTickWarm(b *testing.B) {
	m, _ := newManager(b, Options{})
	n := newFakeNode("cn1", 100, checkNames(20)...)
	n.tick(m, n.set("c7", "bad", true))
	b.ReportAllocs()
	for b.Loop() {
		m.Tick(n.name, n.t, n.descs, n.values)
	}
}

// BenchmarkJobsTapNoJobs is the job index's tap (internal/jobs) on the
// streams of BenchmarkTickNoHealth: the peer to compare with.
func BenchmarkJobsTapNoJobs(b *testing.B) {
	jm, err := jobs.New(jobs.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer jm.Close()
	nodes := make([]*fakeNode, 20000)
	for i := range nodes {
		nodes[i] = newFakeNode("cn"+strconv.Itoa(i), 120)
		nodes[i].fill()
		jm.Tick(nodes[i].name, nodes[i].t, nodes[i].descs, nodes[i].values)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n := nodes[i%len(nodes)]
		jm.Tick(n.name, n.t, n.descs, n.values)
	}
}
