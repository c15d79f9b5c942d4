package logsvc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/logstore"
)

// harness is a running service on loopback ports with its HTTP API.
type harness struct {
	svc    *Service
	dir    string
	cancel context.CancelFunc
	done   chan error
	api    *httptest.Server
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func start(t testing.TB, dir string, mod func(*Config)) *harness {
	t.Helper()
	cfg := Config{UDPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0", DataDir: dir, Location: time.UTC}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{svc: svc, dir: dir, cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- svc.Run(ctx) }()
	h.api = httptest.NewServer(svc.Handler())
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.api.Close()
	h.cancel()
	<-h.done
	h.cancel = nil
}

func (h *harness) tcpAddr() string { _, a, _ := h.svc.Addrs(); return a.String() }
func (h *harness) udpAddr() string { a, _, _ := h.svc.Addrs(); return a.String() }

// waitAccepted waits until n messages are durable.
func (h *harness) waitAccepted(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := h.svc.Stats()
		if st.Accepted >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d accepted messages: %+v", n, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) get(t *testing.T, path string, params url.Values, v any) int {
	t.Helper()
	resp, err := http.Get(h.api.URL + Prefix + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decode: %v", path, err)
	}
	return resp.StatusCode
}

func (h *harness) search(t *testing.T, q string, limit int) SearchResponse {
	t.Helper()
	var r SearchResponse
	if code := h.get(t, "/search", url.Values{"q": {q}, "limit": {fmt.Sprint(limit)}}, &r); code != 200 {
		t.Fatalf("search %q: status %d", q, code)
	}
	return r
}

func sendTCP(t *testing.T, addr string, data string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, data); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestTCPNewlineAndOctetCounting(t *testing.T) {
	h := start(t, t.TempDir(), nil)
	m1 := "<13>Jan  5 09:59:58 cn01 sshd[42]: Accepted publickey for alice from 10.0.0.1"
	m2 := "<11>1 2026-01-05T10:00:00Z cn02 slurmd 77 - - job 12 failed\nwith a newline inside"
	m3 := "<12>Jan  5 10:00:01 cn03 kernel: EDAC MC0: 1 CE memory read error"
	sendTCP(t, h.tcpAddr(), m1+"\n"+fmt.Sprintf("%d %s", len(m2), m2)+m3+"\n"+"garbage without any structure\n")
	h.waitAccepted(t, 4)
	r := h.search(t, "", 10)
	if len(r.Records) != 4 {
		t.Fatalf("got %d records: %+v", len(r.Records), r.Records)
	}
	want := []struct{ host, app, sev, text string }{
		{"127.0.0.1", "", "notice", "garbage without any structure"},
		{"cn03", "kernel", "warning", "EDAC MC0: 1 CE memory read error"},
		{"cn02", "slurmd", "err", "job 12 failed\nwith a newline inside"},
		{"cn01", "sshd", "notice", "Accepted publickey for alice from 10.0.0.1"},
	}
	for i, w := range want {
		g := r.Records[i]
		if g.Host != w.host || g.App != w.app || g.Severity != w.sev || g.Text != w.text || g.Pattern == 0 {
			t.Errorf("record %d: got %+v, want %+v", i, g, w)
		}
	}
}

func TestUDP(t *testing.T) {
	h := start(t, t.TempDir(), nil)
	c, err := net.Dial("udp", h.udpAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 20 {
		fmt.Fprintf(c, "<14>Jan  5 10:00:%02d cn%02d app: udp message %d\n", i, i%3, i)
	}
	// Loopback UDP drops only if our queue is full; the counter says so.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := h.svc.Stats()
		if st.Accepted+st.UDPDropped >= 20 {
			if st.UDPDropped != 0 {
				t.Logf("udp drops: %d", st.UDPDropped)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("udp: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := h.search(t, "host:cn01 udp", 100)
	for _, rec := range r.Records {
		if rec.Host != "cn01" || rec.App != "app" || !strings.HasPrefix(rec.Text, "udp message ") {
			t.Errorf("bad record %+v", rec)
		}
	}
	if len(r.Records) == 0 {
		t.Fatal("no udp records found")
	}
}

func TestMalformedKeptAndCounted(t *testing.T) {
	h := start(t, t.TempDir(), nil)
	sendTCP(t, h.tcpAddr(), "<999>not a pri\n<13>1 2026-99-99T00:00:00Z h a - - - bad time\n99999999 "+strings.Repeat("x", 100))
	h.waitAccepted(t, 2)
	r := h.search(t, "", 10)
	if len(r.Records) != 2 || !r.Records[0].Malformed || !r.Records[1].Malformed ||
		r.Records[0].Text != "<13>1 2026-99-99T00:00:00Z h a - - - bad time" || r.Records[1].Text != "<999>not a pri" {
		t.Fatalf("malformed records: %+v", r.Records)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.svc.Stats().Rejected != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("oversized octet frame not counted as rejected: %+v", h.svc.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := h.svc.Stats(); st.Malformed != 2 {
		t.Fatalf("malformed counter %d, want 2", st.Malformed)
	}
}

func TestRestartKeepsMessagesAndPatternIDs(t *testing.T) {
	dir := t.TempDir()
	h := start(t, dir, nil)
	var b strings.Builder
	for i := range 50 {
		fmt.Fprintf(&b, "<13>Jan  5 10:00:00 cn%02d sshd[%d]: Accepted publickey for user%d from 10.0.0.%d port %d\n", i%5, 100+i, i, i, 4000+i)
		fmt.Fprintf(&b, "<11>Jan  5 10:00:00 cn%02d slurmd[9]: error: job %d exceeded memory limit\n", i%5, i)
	}
	sendTCP(t, h.tcpAddr(), b.String())
	h.waitAccepted(t, 100)
	before := h.search(t, "", 1000)
	var pats PatternsResponse
	h.get(t, "/patterns", nil, &pats)
	var ev EventsResponse
	h.get(t, "/patterns/events", nil, &ev)
	if len(ev.Events) == 0 || ev.Events[0].Template == "" {
		t.Fatalf("no new-pattern events: %+v", ev)
	}
	h.stop()

	h2 := start(t, dir, nil)
	after := h2.search(t, "", 1000)
	if len(after.Records) != 100 || after.Records[0] != before.Records[0] || after.Records[99] != before.Records[99] {
		t.Fatalf("records after restart: %d", len(after.Records))
	}
	sendTCP(t, h2.tcpAddr(), "<13>Jan  5 11:00:00 cn09 sshd[1]: Accepted publickey for zed from 10.9.9.9 port 1\n")
	h2.waitAccepted(t, 1)
	newest := h2.search(t, "zed", 1)
	if len(newest.Records) != 1 || newest.Records[0].Pattern != before.Records[1].Pattern {
		t.Fatalf("sshd pattern id after restart: %+v, want %d", newest.Records, before.Records[1].Pattern)
	}
	var pats2 PatternsResponse
	h2.get(t, "/patterns", nil, &pats2)
	if pats2.Total != pats.Total {
		t.Fatalf("patterns after restart: %d, before %d", pats2.Total, pats.Total)
	}
	var ev2 EventsResponse
	h2.get(t, "/patterns/events", nil, &ev2)
	if len(ev2.Events) != len(ev.Events) {
		t.Fatalf("events after restart: %d, before %d (a known pattern raised a new event?)", len(ev2.Events), len(ev.Events))
	}
}

func TestHTTPAPI(t *testing.T) {
	h := start(t, t.TempDir(), nil)
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "<%d>Jan  5 10:00:%02d cn%02d app%d: value %d is out of range\n", 8+i%8, i, i%3, i%2, i)
	}
	sendTCP(t, h.tcpAddr(), b.String())
	h.waitAccepted(t, 30)

	// Bad queries are 400 with a message.
	for q, want := range map[string]string{
		"q=hots:x":        "unknown filter",
		"limit=abc":       "limit=",
		"since=yesterday": "since=",
		"from=tomorrow":   "from=",
		"q=severity:bad":  "unknown severity",
	} {
		resp, err := http.Get(h.api.URL + Prefix + "/search?" + q)
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]string
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(e["error"], want) {
			t.Errorf("%s: status %d error %q, want 400 with %q", q, resp.StatusCode, e["error"], want)
		}
	}

	// Pagination through the API.
	var seqs []uint64
	cursor := ""
	for {
		var r SearchResponse
		h.get(t, "/search", url.Values{"q": {"host:cn01 app:app1"}, "limit": {"2"}, "cursor": {cursor}}, &r)
		for _, rec := range r.Records {
			seqs = append(seqs, rec.Seq)
		}
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	// i%3==1 and i%2==1: i = 1, 7, 13, 19, 25 -> seq i+1.
	if fmt.Sprint(seqs) != "[26 20 14 8 2]" {
		t.Fatalf("paged seqs %v", seqs)
	}

	var pats PatternsResponse
	h.get(t, "/patterns", url.Values{"sort": {"count"}}, &pats)
	if pats.Total == 0 || pats.Patterns[0].Count == 0 || len(pats.Patterns[0].Hosts) == 0 {
		t.Fatalf("patterns: %+v", pats)
	}
	var sum uint64
	for _, p := range pats.Patterns {
		sum += p.Count
		var inMin uint32
		for _, c := range p.PerMinute.Counts {
			inMin += c
		}
		if uint64(inMin) != p.Count {
			t.Errorf("pattern %d: %d in the minute series, count %d", p.ID, inMin, p.Count)
		}
	}
	if sum != 30 {
		t.Fatalf("pattern counts sum to %d, want 30", sum)
	}

	// Without the prefix too, and unknown paths are 404.
	resp, _ := http.Get(h.api.URL + "/stats")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/stats without prefix: %d", resp.StatusCode)
	}
	resp, _ = http.Get(h.api.URL + Prefix + "/nope")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown path: %d", resp.StatusCode)
	}
}

func TestTailSSE(t *testing.T) {
	h := start(t, t.TempDir(), nil)
	sendTCP(t, h.tcpAddr(), "<13>Jan  5 10:00:00 old app: before the tail\n")
	h.waitAccepted(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.api.URL+Prefix+"/tail?q="+url.QueryEscape("host:cn0*"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sendTCP(t, h.tcpAddr(), "<13>Jan  5 10:00:01 other app: not matching\n<13>Jan  5 10:00:02 cn07 app: live one\n")
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Host != "cn07" || r.Text != "live one" {
			t.Fatalf("tail got %+v", r)
		}
		return
	}
	t.Fatalf("tail ended without a record: %v", sc.Err())
}

// TestMergedPatternSearch checks that after the miner merges patterns,
// searching any of their ids finds the messages stored under all of them,
// and records show the surviving id.
func TestMergedPatternSearch(t *testing.T) {
	h := start(t, t.TempDir(), nil)
	names := []string{"root", "admin", "oracle", "guest", "ftp", "backup"}
	for _, n := range names {
		// One at a time, so each is mined before the next.
		sendTCP(t, h.tcpAddr(), "<13>Jan  5 10:00:00 cn01 sshd: Failed password for "+n+" from 10.0.0.1 port 22 ssh2\n")
	}
	h.waitAccepted(t, uint64(len(names)))
	st := h.svc.Store()
	raw, _, err := st.Search(logstoreQuery(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[uint64]bool{}
	for _, r := range raw {
		stored[r.Pattern] = true
	}
	if len(stored) < 2 {
		t.Skipf("the miner did not merge these (%d stored ids); nothing to check", len(stored))
	}
	for id := range stored {
		r := h.search(t, fmt.Sprintf("pattern:%d", id), 100)
		if len(r.Records) != len(names) {
			t.Fatalf("pattern:%d found %d records, want %d (stored ids %v)", id, len(r.Records), len(names), stored)
		}
		for _, rec := range r.Records {
			if rec.Pattern != r.Records[0].Pattern {
				t.Fatalf("records show different pattern ids: %d and %d", rec.Pattern, r.Records[0].Pattern)
			}
		}
	}
}

func logstoreQuery() logstore.Query { return logstore.Query{} }
