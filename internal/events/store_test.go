package events

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// clock is a settable time for the store's now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func open(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func all(t testing.TB, s *Store) []Event {
	t.Helper()
	evs, _, err := s.Query(Filter{Limit: MaxLimit, Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	in := []Event{
		{Time: t0, Kind: KindNodeDown, Node: "cn1", Severity: SeverityCritical, Summary: "node cn1 down", Link: "#/node/cn1"},
		{Time: t0.Add(time.Second), Kind: KindJobStart, Job: "123", Summary: "job 123 (user alice) started on 4 nodes",
			Labels: map[string]string{"user": "alice", "nodes": "4"}, Link: "#/jobs/123"},
		{Time: t0.Add(2 * time.Second), Kind: KindGap, Node: "cn2", Severity: "bogus", Summary: "line\nbreak \xff"},
	}
	for _, e := range in {
		s.Emit(e)
	}
	s.Sync()
	got := all(t, s)
	want := []Event{in[0], in[1], in[2]}
	for i := range want {
		want[i].ID = uint64(i + 1)
	}
	want[1].Severity = SeverityInfo
	want[2].Severity = SeverityInfo // unknown severities are info
	want[2].Summary = "line break \uFFFD"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("before restart:\n got %+v\nwant %+v", got, want)
	}
	s.Close()
	s = open(t, Options{Dir: dir})
	if got := all(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restart:\n got %+v\nwant %+v", got, want)
	}
}

// IDs go on increasing after a restart, also when every event was removed
// by the retention.
func TestRestartKeepsIDsIncreasing(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	s := open(t, Options{Dir: dir, Retention: time.Hour, now: c.now})
	for range 5 {
		s.Emit(Event{Time: t0, Kind: KindGap})
	}
	s.Sync()
	s.Close()
	s = open(t, Options{Dir: dir, Retention: time.Hour, now: c.now})
	s.Emit(Event{Time: t0, Kind: KindGap})
	s.Sync()
	evs := all(t, s)
	if len(evs) != 6 || evs[5].ID != 6 {
		t.Fatalf("after a restart: %d events, last ID %d; want 6, 6", len(evs), evs[len(evs)-1].ID)
	}
	// Two days later everything is past the retention.
	c.set(t0.Add(48 * time.Hour))
	s.retainNow(t)
	if n := s.Len(); n != 0 {
		t.Fatalf("%d events left after the retention, want 0", n)
	}
	s.Close()
	s = open(t, Options{Dir: dir, Retention: time.Hour, now: c.now})
	s.Emit(Event{Kind: KindGap})
	s.Sync()
	if evs := all(t, s); len(evs) != 1 || evs[0].ID != 7 {
		t.Fatalf("after retention and a restart: %+v, want one event of ID 7", evs)
	}
	// The empty segment that kept the ID took the event (on another day
	// than its file's): it is there after another restart.
	s.Close()
	s = open(t, Options{Dir: dir, Retention: time.Hour, now: c.now})
	if evs := all(t, s); len(evs) != 1 || evs[0].ID != 7 {
		t.Fatalf("after a second restart: %+v, want one event of ID 7", evs)
	}
}

// retainNow runs the retention on the writer's goroutine (it owns the
// segments).
func (s *Store) retainNow(t testing.TB) {
	t.Helper()
	if !s.do(s.retain) {
		t.Fatal("store closed")
	}
}

func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir})
	for i := range 3 {
		s.Emit(Event{Kind: KindGap, Node: fmt.Sprintf("cn%d", i)})
	}
	s.Sync()
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if len(files) != 1 {
		t.Fatalf("segments: %v", files)
	}
	fi, _ := os.Stat(files[0])
	// A crash in the middle of the third record.
	if err := os.Truncate(files[0], fi.Size()-5); err != nil {
		t.Fatal(err)
	}
	s = open(t, Options{Dir: dir})
	evs := all(t, s)
	if len(evs) != 2 || evs[1].Node != "cn1" {
		t.Fatalf("after a torn tail: %+v, want cn0 and cn1", evs)
	}
	s.Emit(Event{Kind: KindGap, Node: "after"})
	s.Sync()
	s.Close()
	// The tail was cut, so what follows is readable after another restart.
	s = open(t, Options{Dir: dir})
	evs = all(t, s)
	if len(evs) != 3 || evs[2].Node != "after" || evs[2].ID <= evs[1].ID {
		t.Fatalf("appended after the cut: %+v", evs)
	}
	// Garbage (a flipped byte) in the tail is cut too.
	s.Close()
	b, _ := os.ReadFile(files[0])
	b[len(b)-3] ^= 0xff
	os.WriteFile(files[0], b, 0o644)
	s = open(t, Options{Dir: dir})
	if evs := all(t, s); len(evs) != 2 {
		t.Fatalf("after a corrupt last record: %d events, want 2", len(evs))
	}
}

func TestRetentionDropsWholeDays(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: t0}
	s := open(t, Options{Dir: dir, Retention: 36 * time.Hour, now: c.now})
	for d := range 4 {
		c.set(t0.Add(time.Duration(d) * 24 * time.Hour))
		s.Emit(Event{Kind: KindGap, Node: fmt.Sprintf("day%d", d)})
		s.Sync()
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if len(files) != 4 {
		t.Fatalf("%d segments for 4 days, want 4", len(files))
	}
	s.retainNow(t)
	evs := all(t, s)
	if len(evs) != 2 || evs[0].Node != "day2" {
		t.Fatalf("after retention: %+v, want day2 and day3", evs)
	}
	files, _ = filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if len(files) != 2 {
		t.Fatalf("%d segments left, want 2", len(files))
	}
	// Queries read through the index after segments went, and the names
	// of the events gone are forgotten.
	if evs, _, err := s.Query(Filter{Node: "day3"}); err != nil || len(evs) != 1 || evs[0].Node != "day3" {
		t.Fatalf("query after retention: %v %v", evs, err)
	}
	if evs, _, err := s.Query(Filter{Node: "day*"}); err != nil || len(evs) != 2 {
		t.Fatalf("glob after retention: %v %v", evs, err)
	}
	if _, ok := s.nodes.lookup("day0"); ok || len(s.nodes.names) != 3 {
		t.Fatalf("node names after retention: %q", s.nodes.names)
	}
}

func TestMaxEventsDropsOldestSegments(t *testing.T) {
	c := &clock{t: t0}
	s := open(t, Options{Dir: t.TempDir(), MaxEvents: 10, SegmentBytes: 200, now: c.now})
	for i := range 40 {
		s.Emit(Event{Kind: KindGap, Node: fmt.Sprintf("n%d", i)})
		s.Sync()
	}
	evs := all(t, s)
	if len(evs) > 10 || len(evs) == 0 || evs[len(evs)-1].Node != "n39" {
		t.Fatalf("%d events kept (newest %+v), want at most 10 ending with n39", len(evs), evs[len(evs)-1])
	}
}

func TestEmitDropsWhenFull(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := open(t, Options{Dir: t.TempDir(), Queue: 1, Registerer: reg})
	// Hold the writer so the queue stays full.
	s.mu.Lock()
	for range 100 {
		s.Emit(Event{Kind: KindGap})
	}
	s.mu.Unlock()
	s.Sync()
	dropped := testutil.ToFloat64(s.m.dropped)
	stored := testutil.ToFloat64(s.m.stored.WithLabelValues(KindGap))
	if dropped == 0 || dropped+stored != 100 {
		t.Fatalf("dropped %v, stored %v: want some dropped, 100 in all", dropped, stored)
	}
	s.Close()
	s.Emit(Event{Kind: KindGap}) // after Close: dropped, no panic
	if got := testutil.ToFloat64(s.m.dropped); got != dropped+1 {
		t.Fatalf("dropped after close: %v, want %v", got, dropped+1)
	}
}

func TestFilters(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir()})
	evs := []Event{
		{Time: t0, Kind: KindNodeDown, Node: "cn1", Severity: SeverityCritical},
		{Time: t0.Add(time.Minute), Kind: KindNodeUp, Node: "cn1"},
		{Time: t0.Add(2 * time.Minute), Kind: KindJobStart, Job: "7", Node: ""},
		{Time: t0.Add(3 * time.Minute), Kind: KindGap, Node: "gpu12", Severity: SeverityWarning},
		{Time: t0.Add(4 * time.Minute), Kind: KindJobEnd, Job: "7"},
		{Time: t0.Add(5 * time.Minute), Kind: KindNodeDown, Node: "gpu3", Severity: SeverityCritical},
	}
	for _, e := range evs {
		s.Emit(e)
	}
	s.Sync()
	for _, c := range []struct {
		name string
		f    Filter
		want []uint64 // IDs, newest first
	}{
		{"all", Filter{}, []uint64{6, 5, 4, 3, 2, 1}},
		{"since", Filter{Since: t0.Add(3 * time.Minute)}, []uint64{6, 5, 4}},
		{"until", Filter{Until: t0.Add(time.Minute)}, []uint64{2, 1}},
		{"kind", Filter{Kinds: []string{KindNodeDown}}, []uint64{6, 1}},
		{"kinds", Filter{Kinds: []string{KindJobStart, KindJobEnd}}, []uint64{5, 3}},
		{"unknown kind", Filter{Kinds: []string{"nope"}}, nil},
		{"severity", Filter{Severities: []string{SeverityCritical}}, []uint64{6, 1}},
		{"severities", Filter{Severities: []string{SeverityWarning, SeverityCritical}}, []uint64{6, 4, 1}},
		{"node", Filter{Node: "cn1"}, []uint64{2, 1}},
		{"node glob", Filter{Node: "gpu*"}, []uint64{6, 4}},
		{"node class", Filter{Node: "gpu[0-9]"}, []uint64{6}},
		{"unknown node", Filter{Node: "cn9"}, nil},
		{"job", Filter{Job: "7"}, []uint64{5, 3}},
		{"unknown job", Filter{Job: "8"}, nil},
		{"before", Filter{Before: 3}, []uint64{2, 1}},
		{"after", Filter{After: 4}, []uint64{6, 5}},
		{"combined", Filter{Kinds: []string{KindNodeDown, KindNodeUp}, Node: "cn*", Since: t0.Add(30 * time.Second)}, []uint64{2}},
		{"limit", Filter{Limit: 2}, []uint64{6, 5}},
		{"oldest", Filter{Limit: 2, Oldest: true}, []uint64{1, 2}},
	} {
		got, _, err := s.Query(c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var ids []uint64
		for _, e := range got {
			ids = append(ids, e.ID)
		}
		if !reflect.DeepEqual(ids, c.want) {
			t.Errorf("%s: IDs %v, want %v", c.name, ids, c.want)
		}
	}
	for _, f := range []Filter{{Node: "cn["}, {Node: strings.Repeat("*a", 65)}, {Severities: []string{"fatal"}}, {Limit: -1}, {Since: t0, Until: t0.Add(-1)}} {
		if _, _, err := s.Query(f); err == nil {
			t.Errorf("%+v: no error", f)
		}
	}
}

func TestPagination(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir()})
	for i := range 25 {
		s.Emit(Event{Kind: KindGap, Node: fmt.Sprintf("n%d", i%3)})
	}
	s.Sync()
	var ids []uint64
	f := Filter{Node: "n1", Limit: 3}
	for pages := 0; ; pages++ {
		evs, next, err := s.Query(f)
		if err != nil || pages > 10 {
			t.Fatal(err, pages)
		}
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		if next == 0 {
			break
		}
		f.Before = next
	}
	var want []uint64
	for id := uint64(25); id >= 1; id-- {
		if (id-1)%3 == 1 {
			want = append(want, id)
		}
	}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("paged IDs %v, want %v", ids, want)
	}
}

func TestSanitizeBounds(t *testing.T) {
	long := string(make([]byte, 5000))
	labels := map[string]string{}
	for i := range 100 {
		labels[fmt.Sprintf("k%03d", i)] = long
	}
	nodes := make([]string, 5000)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("%05d", i) + long
	}
	e := Event{Kind: long, Node: "é" + long, Summary: long, Labels: labels, Nodes: nodes}
	sanitize(&e, t0)
	if len(e.Kind) > 64 || len(e.Node) > MaxField || len(e.Summary) > MaxSummary || len(e.Labels) != MaxLabels || e.Time != t0 ||
		len(e.Nodes) != MaxNodes || len(e.Nodes[0]) != MaxField {
		t.Fatalf("not bounded: kind %d node %d summary %d labels %d", len(e.Kind), len(e.Node), len(e.Summary), len(e.Labels))
	}
	b := appendRecord(nil, &e)
	got, n, err := decodeRecord(b)
	if err != nil || n != len(b) || !reflect.DeepEqual(got, e) {
		t.Fatalf("largest event: %v, %d of %d bytes", err, n, len(b))
	}
}

func FuzzDecode(f *testing.F) {
	e := Event{ID: 9, Time: t0, Kind: KindGap, Node: "cn1", Severity: SeverityInfo, Summary: "x", Labels: map[string]string{"a": "b"}, Nodes: []string{"cn1", "cn2"}}
	f.Add(appendRecord(nil, &e))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, n, err := decodeRecord(b)
		if err != nil {
			return
		}
		if n > len(b) || n < recHeaderLen {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		// What decodes encodes to the same bytes (labels are sorted).
		again, _, err := decodeRecord(appendRecord(nil, &e))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encoded: %v", err)
		}
	})
}

// A corrupt record in an older segment skips the rest of that segment
// only; the newer segments and the IDs are intact.
func TestCorruptOlderSegment(t *testing.T) {
	dir := t.TempDir()
	s := open(t, Options{Dir: dir, SegmentBytes: 100})
	for i := range 12 {
		s.Emit(Event{Kind: KindGap, Node: fmt.Sprintf("n%02d", i)})
		s.Sync()
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if len(files) < 3 {
		t.Fatalf("%d segments, want at least 3", len(files))
	}
	b, _ := os.ReadFile(files[0])
	b[fileHeaderLen+recHeaderLen+3] ^= 0xff // the first record's payload
	os.WriteFile(files[0], b, 0o644)
	s = open(t, Options{Dir: dir, SegmentBytes: 100})
	evs := all(t, s)
	if len(evs) == 0 || len(evs) >= 12 || evs[len(evs)-1].Node != "n11" {
		t.Fatalf("after corrupting the oldest segment: %d events, last %+v", len(evs), evs[len(evs)-1])
	}
	s.Emit(Event{Kind: KindGap})
	s.Sync()
	if evs := all(t, s); evs[len(evs)-1].ID != 13 {
		t.Fatalf("next ID %d, want 13", evs[len(evs)-1].ID)
	}
}

// An event of several nodes (a job's) matches a node filter on any of
// them, in queries and live, before and after the retention renumbers
// the names.
func TestEventOfSeveralNodes(t *testing.T) {
	c := &clock{t: t0}
	s := open(t, Options{Dir: t.TempDir(), Retention: 36 * time.Hour, now: c.now})
	s.Emit(Event{Kind: KindGap, Node: "old"}) // to be removed by the retention
	s.Sync()
	c.set(t0.Add(48 * time.Hour))
	job := Event{Kind: KindJobStart, Job: "9", Nodes: []string{"cn1", "", "gpu3"}}
	s.Emit(job)
	s.Emit(Event{Kind: KindGap, Node: "cn2"})
	s.Sync()
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			node string
			want int
		}{{"cn1", 1}, {"gpu3", 1}, {"gpu*", 1}, {"cn*", 2}, {"cn2", 1}, {"cn9*", 0}} {
			evs, _, err := s.Query(Filter{Node: c.node})
			if err != nil || len(evs) != c.want {
				t.Errorf("%s: node=%s: %d events (%v), want %d", when, c.node, len(evs), err, c.want)
			}
		}
		evs, _, _ := s.Query(Filter{Job: "9"})
		if len(evs) != 1 || !reflect.DeepEqual(evs[0].Nodes, []string{"cn1", "gpu3"}) {
			t.Errorf("%s: job 9: %+v", when, evs)
		}
	}
	check("before retention")
	s.retainNow(t)
	if s.Len() != 2 {
		t.Fatalf("%d events after retention, want 2", s.Len())
	}
	check("after retention")
	f := Filter{Node: "gpu3"}
	if e := (Event{Nodes: []string{"cn1", "gpu3"}}); !f.Match(&e) {
		t.Error("live match misses a job's second node")
	}
}

// Records longer than the read buffer read back whole.
func TestLargeEventReadBack(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir()})
	nodes := make([]string, 300)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("cn%04d", i)
	}
	in := Event{Time: t0, Kind: KindJobEnd, Job: "5", Severity: SeverityWarning, Summary: strings.Repeat("s", MaxSummary), Nodes: nodes}
	s.Emit(Event{Time: t0, Kind: KindGap})
	s.Emit(in)
	s.Emit(Event{Time: t0, Kind: KindGap})
	s.Sync()
	evs, _, err := s.Query(Filter{Job: "5"})
	in.ID = 2
	if err != nil || len(evs) != 1 || !reflect.DeepEqual(evs[0], in) {
		t.Fatalf("large event: %v, %d events", err, len(evs))
	}
}
