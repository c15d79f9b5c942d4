package events

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func serve(t *testing.T, s *Store) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET "+PathQuery, s.QueryHandler())
	mux.Handle("GET "+PathStream, s.StreamHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func getJSON(t *testing.T, u string, v any) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

func TestQueryAPI(t *testing.T) {
	c := &clock{t: t0.Add(time.Hour)}
	s := open(t, Options{Dir: t.TempDir(), now: c.now})
	for i, n := range []string{"cn1", "cn2", "gpu1", "cn3"} {
		s.Emit(Event{Time: t0.Add(time.Duration(i) * 10 * time.Minute), Kind: KindNodeDown, Node: n, Severity: SeverityCritical})
	}
	s.Sync()
	srv := serve(t, s)
	var a struct {
		Status string
		Data   struct {
			Events []Event
			Next   string
		}
	}
	// 15m = now - 15 minutes = t0+45m: none; 35m: the last one (t0+30m).
	for _, c := range []struct {
		q    string
		want []string
		next string
	}{
		{"", []string{"cn3", "gpu1", "cn2", "cn1"}, ""},
		{"since=35m", []string{"cn3"}, ""},
		{"since=" + t0.Add(15*time.Minute).Format(time.RFC3339), []string{"cn3", "gpu1"}, ""},
		{"until=" + url.QueryEscape("1795608600"), []string{"cn2", "cn1"}, ""}, // t0+10m in Unix seconds
		{"node=cn*&limit=2", []string{"cn3", "cn2"}, "2"},
		{"node=cn*&limit=2&before=2", []string{"cn1"}, ""},
		{"kind=node_up,gap", nil, ""},
		{"severity=critical&job=", []string{"cn3", "gpu1", "cn2", "cn1"}, ""},
	} {
		if code := getJSON(t, srv.URL+PathQuery+"?"+c.q, &a); code != 200 || a.Status != "success" {
			t.Fatalf("%s: HTTP %d %s", c.q, code, a.Status)
		}
		var got []string
		for _, e := range a.Data.Events {
			got = append(got, e.Node)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") || a.Data.Next != c.next {
			t.Errorf("%s: %v next %q, want %v next %q", c.q, got, a.Data.Next, c.want, c.next)
		}
		if a.Data.Events == nil {
			t.Errorf("%s: events is null, want []", c.q)
		}
	}
	for _, q := range []string{"since=yesterday", "limit=0", "limit=x", "node=[", "severity=fatal", "before=-1", "kind=a&kind=b"} {
		var e struct{ Status, ErrorType, Error string }
		if code := getJSON(t, srv.URL+PathQuery+"?"+q, &e); code != 400 || e.Status != "error" || e.ErrorType != "bad_data" || e.Error == "" {
			t.Errorf("%s: HTTP %d %+v, want 400 bad_data", q, code, e)
		}
	}
}

// sseReader reads events off a stream.
type sseReader struct {
	t    *testing.T
	body io.ReadCloser
	sc   *bufio.Scanner
}

func openStream(t *testing.T, u string, hdr http.Header) (*sseReader, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{t: t, body: resp.Body, sc: bufio.NewScanner(resp.Body)}, resp
}

// next returns the next event (skipping comments), or fails after 10 s.
func (r *sseReader) next() Event {
	r.t.Helper()
	got := make(chan Event, 1)
	go func() {
		var id string
		for r.sc.Scan() {
			line := r.sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = line[4:]
			case strings.HasPrefix(line, "data: "):
				var e Event
				if err := json.Unmarshal([]byte(line[6:]), &e); err != nil {
					close(got)
					return
				}
				if id == "" {
					close(got)
					return
				}
				got <- e
				return
			}
		}
		close(got)
	}()
	select {
	case e, ok := <-got:
		if !ok {
			r.t.Fatal("stream ended or sent a bad event")
		}
		return e
	case <-time.After(10 * time.Second):
		r.t.Fatal("no event within 10 s")
	}
	return Event{}
}

func TestStreamLiveAndReplay(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir()})
	srv := serve(t, s)
	r, resp := openStream(t, srv.URL+PathStream+"?node=cn*", nil)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	// The subscription exists once the handler wrote its first line.
	waitFor(t, func() bool { return s.clients.Load() == 1 })
	s.Emit(Event{Kind: KindNodeDown, Node: "gpu1"}) // filtered out
	s.Emit(Event{Kind: KindNodeDown, Node: "cn1"})
	if e := r.next(); e.Node != "cn1" || e.ID != 2 {
		t.Fatalf("live: %+v, want cn1 of ID 2", e)
	}
	s.Emit(Event{Kind: KindNodeUp, Node: "cn1"})
	s.Emit(Event{Kind: KindNodeUp, Node: "cn2"})
	s.Sync()
	// A client reconnecting after ID 2 gets 3 and 4, then live ones.
	r2, _ := openStream(t, srv.URL+PathStream+"?node=cn*", http.Header{"Last-Event-Id": {"2"}})
	for _, want := range []uint64{3, 4} {
		if e := r2.next(); e.ID != want {
			t.Fatalf("replay: ID %d, want %d", e.ID, want)
		}
	}
	s.Emit(Event{Kind: KindGap, Node: "cn9"})
	if e := r2.next(); e.ID != 5 || e.Node != "cn9" {
		t.Fatalf("live after replay: %+v", e)
	}
	// since= replays by time.
	r3, _ := openStream(t, srv.URL+PathStream+"?since=1h&kind=node_up", nil)
	if e := r3.next(); e.ID != 3 {
		t.Fatalf("replay by since: %+v, want ID 3", e)
	}
}

func TestStreamClientCapAndSlowClient(t *testing.T) {
	s := open(t, Options{Dir: t.TempDir(), MaxClients: 1, writeTimeout: 500 * time.Millisecond})
	srv := serve(t, s)
	r, _ := openStream(t, srv.URL+PathStream, nil)
	waitFor(t, func() bool { return s.clients.Load() == 1 })
	resp, err := http.Get(srv.URL + PathStream)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream: HTTP %d, want 503", resp.StatusCode)
	}
	// r never reads: its queue fills, and it is dropped rather than waited on.
	_ = r
	big := strings.Repeat("x", MaxSummary)
	for range 20 {
		for range subQueue {
			s.Emit(Event{Kind: KindGap, Summary: big})
		}
		s.Sync()
		if s.clients.Load() == 0 {
			break
		}
	}
	waitFor(t, func() bool { return s.clients.Load() == 0 })
	if n := s.Len(); n < subQueue {
		t.Fatalf("only %d events stored", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
