package simulate

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

var quiet = slog.New(slog.DiscardHandler)

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recorder is an event endpoint that notes "ID start|end" in arrival order
// and passes the request on.
type recorder struct {
	mu   sync.Mutex
	seen []string
	next http.Handler
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := req.ParseForm(); err == nil {
		r.mu.Lock()
		r.seen = append(r.seen, req.PathValue("id")+" "+req.PostForm.Get("event"))
		r.mu.Unlock()
	}
	if r.next != nil {
		r.next.ServeHTTP(w, req)
	}
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func newEventServer(t *testing.T, next http.Handler) (*recorder, string) {
	rec := &recorder{next: next}
	mux := http.NewServeMux()
	mux.Handle("POST /api/v1/jobs/{id}/event", rec)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// The server's job index, fed by the events of a seeded scheduler, holds
// every started job's metadata, and every ended job's end, as the
// scheduler lists them.
func TestJobEventsToServer(t *testing.T) {
	m, err := jobs.New(jobs.Options{Dir: t.TempDir(), Interval: time.Second, Events: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	api := http.NewServeMux()
	m.Register(api)
	rec, url := newEventServer(t, api)

	c := newCluster(t, 24, 8, 3)
	ev, err := NewEventSender(EventOptions{Server: url + "/", Timeout: 5 * time.Second, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	queued := 0
	c.sched.OnEvent(func(e JobEvent) {
		if ev.Send(e) {
			queued++
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ev.Run(ctx) }()
	for range 400 {
		c.tick()
	}
	waitFor(t, "the events posted", func() bool { return ev.Sent()+ev.Failed() == uint64(queued) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ev.Failed() != 0 || ev.Dropped() != 0 {
		t.Fatalf("%d events failed, %d dropped", ev.Failed(), ev.Dropped())
	}

	order := map[string]int{}
	for i, s := range rec.list() {
		if _, dup := order[s]; dup {
			t.Errorf("%s posted twice", s)
		}
		order[s] = i
	}
	close := func(a, b time.Time) bool { return a.Sub(b).Abs() < time.Millisecond }
	var running, ended int
	for _, sj := range c.sched.Jobs() {
		if sj.State == "pending" {
			if _, ok := order[sj.ID+" start"]; ok {
				t.Errorf("pending job %s: start posted", sj.ID)
			}
			continue
		}
		start, ok := order[sj.ID+" start"]
		if !ok {
			t.Errorf("job %s (%s): no start posted", sj.ID, sj.State)
			continue
		}
		j, err := m.Index().Get(sj.ID)
		if err != nil || j == nil {
			t.Fatalf("job %s not in the index: %v", sj.ID, err)
		}
		if j.User != sj.User || j.Account != sj.Account || j.Partition != sj.Partition || j.Name != sj.Name ||
			!slices.Equal(j.Nodes, sj.Nodes) || j.CPUs != sj.CPUs || j.MemBytes != sj.MemBytes ||
			time.Duration(j.TimeLimit) != sj.TimeLimit || !close(j.Start, sj.Start) {
			t.Errorf("job %s in the index:\n%+v\nthe scheduler's:\n%+v", sj.ID, *j, sj)
		}
		end, hasEnd := order[sj.ID+" end"]
		if sj.State == "running" {
			running++
			if hasEnd || j.State != jobs.StateRunning {
				t.Errorf("running job %s: end posted %v, state %s in the index", sj.ID, hasEnd, j.State)
			}
			continue
		}
		ended++
		switch {
		case !hasEnd:
			t.Errorf("ended job %s: no end posted", sj.ID)
		case end < start:
			t.Errorf("job %s: end posted before start", sj.ID)
		case string(j.State) != sj.State || !close(j.End, sj.End) || j.ExitCode != sj.ExitCode:
			t.Errorf("ended job %s: index has %s at %v exit %d, scheduler %s at %v exit %d",
				sj.ID, j.State, j.End, j.ExitCode, sj.State, sj.End, sj.ExitCode)
		}
	}
	if running == 0 || ended == 0 {
		t.Fatalf("%d running and %d ended jobs: want some of each", running, ended)
	}
	t.Logf("%d events: %d jobs running, %d ended", queued, running, ended)
}

// A full queue drops events at once rather than blocking the caller (the
// scheduler, in the nodes' ticks); what was queued is posted in order.
func TestEventSenderQueueBound(t *testing.T) {
	rec, url := newEventServer(t, nil)
	ev, err := NewEventSender(EventOptions{Server: url, Queue: 3, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var ok []bool
	for i := range 5 {
		ok = append(ok, ev.Send(JobEvent{Start: true, Job: SimJob{ID: string(rune('1' + i))}}))
	}
	if !slices.Equal(ok, []bool{true, true, true, false, false}) || ev.Dropped() != 2 {
		t.Fatalf("Send into a queue of 3: %v, %d dropped", ok, ev.Dropped())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ev.Run(ctx)
	waitFor(t, "3 events posted", func() bool { return ev.Sent() == 3 })
	if got := rec.list(); !slices.Equal(got, []string{"1 start", "2 start", "3 start"}) {
		t.Fatalf("posted %q", got)
	}
}

// A server that does not answer costs a timeout per event, not the
// sender; one that refuses is counted too.
func TestEventSenderFailures(t *testing.T) {
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang) // before Close, which waits for the handlers
	ev, err := NewEventSender(EventOptions{Server: slow.URL, Timeout: 50 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ev.Run(ctx)
	ev.Send(JobEvent{Job: SimJob{ID: "1"}})
	ev.Send(JobEvent{Job: SimJob{ID: "2"}})
	waitFor(t, "2 timeouts", func() bool { return ev.Failed() == 2 })

	_, url := newEventServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "job events are off", http.StatusNotFound)
	}))
	ev2, _ := NewEventSender(EventOptions{Server: url, Log: quiet})
	go ev2.Run(ctx)
	ev2.Send(JobEvent{Job: SimJob{ID: "1"}})
	waitFor(t, "a refusal", func() bool { return ev2.Failed() == 1 })
	if ev2.Sent() != 0 {
		t.Fatalf("a 404 counted as sent")
	}

	for _, bad := range []string{"", "127.0.0.1:9090", "ftp://x", "http://", "http://x/?a=1"} {
		if _, err := NewEventSender(EventOptions{Server: bad}); err == nil {
			t.Errorf("NewEventSender(%q): no error", bad)
		}
	}
}

func TestHostlist(t *testing.T) {
	for want, in := range map[string][]string{
		"":                          nil,
		"cn[00001]":                 {"cn00001"},
		"cn[00001-00003,00007]":     {"cn00001", "cn00002", "cn00003", "cn00007"},
		"cn[00009-00010]":           {"cn00009", "cn00010"},
		"cn[9],cn[10-11]":           {"cn9", "cn10", "cn11"},
		"login,cn[00002],gpu[1-2]":  {"login", "cn00002", "gpu1", "gpu2"},
		"cn[00005],cn[00001-00002]": {"cn00005", "cn00001", "cn00002"},
		"a[1]b1":                    {"a[1]b1"},
	} {
		if got := Hostlist(in); got != want {
			t.Errorf("Hostlist(%q) = %q, want %q", in, got, want)
		}
	}
	// The simulator's names, as many as a job may have, fit the server's
	// 4096-byte field when contiguous.
	var names []string
	for i := range 100_000 {
		names = append(names, NodeName(i+1))
	}
	if got := Hostlist(names); got != "cn[00001-99999],cn[100000]" || strings.Count(got, ",") != 1 {
		t.Errorf("Hostlist of 100000 nodes = %q", got)
	}
}
