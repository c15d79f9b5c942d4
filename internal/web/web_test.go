package web

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
)

// fakeSource serves a fixed node list and values, changeable under mu.
type fakeSource struct {
	mu      sync.Mutex
	nodes   []NodeInfo
	vals    map[string]float64
	err     error // returned by NodeValues while set
	tree    any
	calls   int
	lastArg string
}

func (f *fakeSource) NodeValues(ctx context.Context, expr string, t time.Time) (map[string]float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.lastArg = expr
	if f.err != nil {
		return nil, f.err
	}
	m := make(map[string]float64, len(f.vals))
	for k, v := range f.vals {
		m[k] = v
	}
	return m, nil
}

func (f *fakeSource) Nodes(ctx context.Context) ([]NodeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]NodeInfo(nil), f.nodes...), nil
}

func (f *fakeSource) Tree(ctx context.Context) (any, error) { return f.tree, nil }

func (f *fakeSource) set(fn func(f *fakeSource)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

type event struct{ name, data string }

// sseReader reads events from a live stream.
type sseReader struct {
	t    *testing.T
	body io.ReadCloser
	br   *bufio.Reader
}

func openLive(t *testing.T, url string) (*sseReader, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseReader{t: t, body: resp.Body, br: bufio.NewReader(resp.Body)}, resp
}

// next returns the next event with a name (skipping the retry hint), or
// an error at end of stream.
func (r *sseReader) next() (event, error) {
	var ev event
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name != "" {
				return ev, nil
			}
		case strings.HasPrefix(line, "event: "):
			ev.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[len("data: "):]
		}
	}
}

func (r *sseReader) mustNext(want string) event {
	r.t.Helper()
	ev, err := r.next()
	if err != nil {
		r.t.Fatalf("reading %s event: %v", want, err)
	}
	if ev.name != want {
		r.t.Fatalf("got event %q (%s), want %q", ev.name, ev.data, want)
	}
	return ev
}

type frameData struct {
	T   int64   `json:"t"`
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	Q   string  `json:"q"`
}

func decodeFrame(t *testing.T, ev event) (frameData, []byte) {
	t.Helper()
	var f frameData
	if err := json.Unmarshal([]byte(ev.data), &f); err != nil {
		t.Fatalf("frame %q: %v", ev.data, err)
	}
	q, err := base64.StdEncoding.DecodeString(f.Q)
	if err != nil {
		t.Fatalf("frame q: %v", err)
	}
	return f, q
}

func decodeNodes(t *testing.T, ev event) []string {
	t.Helper()
	var v struct{ Nodes []NodeInfo }
	if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
		t.Fatalf("nodes %q: %v", ev.data, err)
	}
	var names []string
	for _, n := range v.Nodes {
		names = append(names, n.Name)
	}
	return names
}

func newServer(t *testing.T, src Source, opts Options) (*Handler, *httptest.Server) {
	t.Helper()
	opts.Source = src
	h := New(opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv
}

func TestLiveFrames(t *testing.T) {
	src := &fakeSource{
		// Unsorted on purpose: the stream orders naturally.
		nodes: []NodeInfo{{Name: "cn10", Up: true}, {Name: "cn2", Up: true}, {Name: "cn1", Up: true}, {Name: "cn3"}, {Name: "cn4", Up: true}},
		// cn3 is down (its value must not count), cn4 has none, cn9 is unknown.
		vals: map[string]float64{"cn1": 10, "cn2": 20, "cn10": 15, "cn3": 1000, "cn9": -5},
	}
	h, srv := newServer(t, src, Options{Interval: 20 * time.Millisecond})
	r, resp := openLive(t, srv.URL+"/api/web/live?expr=node_load1")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	names := decodeNodes(t, r.mustNext("nodes"))
	if got, want := strings.Join(names, ","), "cn1,cn2,cn3,cn4,cn10"; got != want {
		t.Fatalf("node order = %s, want %s", got, want)
	}
	f, q := decodeFrame(t, r.mustNext("frame"))
	if f.Min != 10 || f.Max != 20 {
		t.Errorf("range = %v..%v, want 10..20", f.Min, f.Max)
	}
	// 15 is half way: round(0.5*253) = 127.
	want := []byte{0, QuantMax, QuantDown, QuantMissing, 127}
	if string(q) != string(want) {
		t.Errorf("codes = %v, want %v", q, want)
	}
	if d := time.Since(time.UnixMilli(f.T)); d < 0 || d > 5*time.Second {
		t.Errorf("frame time %v is %v from now", f.T, d)
	}
	// The next frame reuses the node list: no second nodes event.
	r.mustNext("frame")
	if src.lastArg != "node_load1" {
		t.Errorf("expr passed = %q", src.lastArg)
	}
	st := h.Stats()
	if st.Frames < 2 || st.NodeListEvents != 1 || st.StreamsActive != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestLiveNodeSetChange(t *testing.T) {
	src := &fakeSource{
		nodes: []NodeInfo{{Name: "a1", Up: true}, {Name: "a2", Up: true}},
		vals:  map[string]float64{"a1": 1, "a2": 2},
	}
	_, srv := newServer(t, src, Options{Interval: 10 * time.Millisecond})
	r, _ := openLive(t, srv.URL+"/api/web/live?expr=x")
	r.mustNext("nodes")
	r.mustNext("frame")
	src.set(func(f *fakeSource) {
		f.nodes = append(f.nodes, NodeInfo{Name: "a3", Up: true})
		f.nodes[0].Up = false
		f.vals["a3"] = 3
	})
	// Frames sent before the change was seen are fine; a nodes event must
	// come, followed by a frame for three nodes.
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.name != "nodes" {
			continue
		}
		if got := strings.Join(decodeNodes(t, ev), ","); got != "a1,a2,a3" {
			t.Fatalf("nodes = %s", got)
		}
		break
	}
	f, q := decodeFrame(t, r.mustNext("frame"))
	if want := []byte{QuantDown, 0, QuantMax}; string(q) != string(want) || f.Min != 2 || f.Max != 3 {
		t.Errorf("frame = %v %v..%v, want %v 2..3", q, f.Min, f.Max, want)
	}
}

func TestLiveBadQueryIsFatal(t *testing.T) {
	src := &fakeSource{
		nodes: []NodeInfo{{Name: "a1", Up: true}},
		err:   fmt.Errorf("parse error at char 3: %w", ErrBadQuery),
	}
	h, srv := newServer(t, src, Options{Interval: 10 * time.Millisecond})
	r, _ := openLive(t, srv.URL+"/api/web/live?expr=rate(")
	ev := r.mustNext("queryerror")
	var e struct {
		Error string
		Fatal bool
	}
	if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
		t.Fatal(err)
	}
	if !e.Fatal || !strings.Contains(e.Error, "parse error at char 3") {
		t.Errorf("error event = %+v", e)
	}
	if ev, err := r.next(); !errors.Is(err, io.EOF) {
		t.Errorf("after fatal error got %+v, %v; want end of stream", ev, err)
	}
	if h.Stats().Errors != 1 {
		t.Errorf("stats = %+v", h.Stats())
	}
}

func TestLiveTransientErrorContinues(t *testing.T) {
	src := &fakeSource{
		nodes: []NodeInfo{{Name: "a1", Up: true}},
		vals:  map[string]float64{"a1": 5},
	}
	_, srv := newServer(t, src, Options{Interval: 10 * time.Millisecond})
	r, _ := openLive(t, srv.URL+"/api/web/live?expr=x")
	r.mustNext("nodes")
	r.mustNext("frame")
	src.set(func(f *fakeSource) { f.err = errors.New("store: disk on fire") })
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.name == "queryerror" {
			if !strings.Contains(ev.data, `"fatal":false`) || !strings.Contains(ev.data, "disk on fire") {
				t.Fatalf("error event = %s", ev.data)
			}
			break
		}
	}
	src.set(func(f *fakeSource) { f.err = nil })
	for {
		ev, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.name == "frame" {
			break
		}
	}
}

func TestLiveBadRequests(t *testing.T) {
	_, srv := newServer(t, &fakeSource{}, Options{})
	for _, tc := range []struct{ query, want string }{
		{"", "missing expr"},
		{"expr=" + strings.Repeat("a", maxExprLen+1), "longer than"},
		{"expr=up&step=soon", "bad step"},
	} {
		resp, err := http.Get(srv.URL + "/api/web/live?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%.40s: %d %q, want 400 containing %q", tc.query, resp.StatusCode, body, tc.want)
		}
	}
}

func TestParseStep(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", time.Second},
		{"5s", 5 * time.Second},
		{"2.5", 2500 * time.Millisecond},
		{"10ms", time.Second}, // clamped to the minimum
		{"1h", maxStep},
	} {
		got, err := parseStep(tc.in, time.Second)
		if err != nil || got != tc.want {
			t.Errorf("parseStep(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"NaN", "x", "1d"} {
		if _, err := parseStep(in, time.Second); err == nil {
			t.Errorf("parseStep(%q) succeeded", in)
		}
	}
}

func TestLiveStreamLimitAndDisconnect(t *testing.T) {
	src := &fakeSource{nodes: []NodeInfo{{Name: "a1", Up: true}}, vals: map[string]float64{"a1": 1}}
	h, srv := newServer(t, src, Options{MaxStreams: 1, Interval: 10 * time.Millisecond})

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/web/live?expr=x", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := &sseReader{t: t, body: resp.Body, br: bufio.NewReader(resp.Body)}
	r.mustNext("nodes")

	second, err := http.Get(srv.URL + "/api/web/live?expr=x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "too many streams") {
		t.Errorf("second stream: %d %q, want 503", second.StatusCode, body)
	}

	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for h.Stats().StreamsActive != 0 {
		if time.Now().After(deadline) {
			t.Fatal("stream still active 5s after the client went away")
		}
		time.Sleep(5 * time.Millisecond)
	}
	src.mu.Lock()
	calls := src.calls
	src.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.calls != calls {
		t.Errorf("source still queried after disconnect: %d -> %d calls", calls, src.calls)
	}
	if st := h.Stats(); st.StreamsRejected != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestAssets(t *testing.T) {
	get := func(h http.Handler, path string) (int, string, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()
	}

	notBuilt := New(Options{Source: &fakeSource{}, Assets: fstest.MapFS{".keep": {}}})
	code, _, body := get(notBuilt, "/")
	if code != 200 || !strings.Contains(body, "make web") {
		t.Errorf("unbuilt /: %d %q", code, body)
	}
	if code, _, _ := get(notBuilt, "/app.js"); code != 404 {
		t.Errorf("unbuilt /app.js: %d, want 404", code)
	}

	built := New(Options{Source: &fakeSource{}, Assets: fstest.MapFS{
		"index.html":  {Data: []byte("<!doctype html><title>Vigil</title>")},
		"app.js":      {Data: []byte("console.log(1)")},
		"favicon.svg": {Data: []byte("<svg xmlns=\"http://www.w3.org/2000/svg\"/>")},
	}})
	for _, p := range []string{"/favicon.svg", "/favicon.ico"} {
		if code, ct, body := get(built, p); code != 200 || ct != "image/svg+xml" || !strings.Contains(body, "<svg") {
			t.Errorf("built %s: %d %q %q, want the SVG icon", p, code, ct, body)
		}
	}
	if code, _, body := get(built, "/"); code != 200 || !strings.Contains(body, "<title>Vigil") {
		t.Errorf("built /: %d %q", code, body)
	}
	if code, ct, _ := get(built, "/app.js"); code != 200 || !strings.Contains(ct, "javascript") {
		t.Errorf("built /app.js: %d %q", code, ct)
	}
}

func TestEmbeddedBuildServes(t *testing.T) {
	// Whatever state dist/ is in (placeholder or a real build), / must work.
	h := New(Options{Source: &fakeSource{}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Vigil") {
		t.Errorf("/: %d %.200q", rec.Code, rec.Body.String())
	}
	if !h.built {
		return
	}
	// A real build links its icon, and the icon is in it.
	if !strings.Contains(rec.Body.String(), `rel="icon" href="favicon.svg"`) {
		t.Errorf("index.html links no favicon.svg")
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/favicon.svg", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "<svg") {
		t.Errorf("/favicon.svg: %d, want the icon built into dist", rec.Code)
	}
}

func TestJSONEndpoints(t *testing.T) {
	src := &fakeSource{nodes: []NodeInfo{{Name: "b2", Up: true}, {Name: "b1"}}}
	_, srv := newServer(t, src, Options{})
	getJSON := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var tree map[string]any
	getJSON("/api/web/tree", &tree)
	if v, ok := tree["tree"]; !ok || v != nil {
		t.Errorf("tree without aggregators = %v, want null", tree)
	}
	src.tree = map[string]any{"name": "agg0", "children": []any{}}
	getJSON("/api/web/tree", &tree)
	if m, _ := tree["tree"].(map[string]any); m["name"] != "agg0" {
		t.Errorf("tree = %v", tree)
	}
	var nodes struct{ Nodes []NodeInfo }
	getJSON("/api/web/nodes", &nodes)
	if len(nodes.Nodes) != 2 || nodes.Nodes[0].Name != "b1" || nodes.Nodes[0].Up || !nodes.Nodes[1].Up {
		t.Errorf("nodes = %+v", nodes)
	}
}

func TestQuantise(t *testing.T) {
	up := func(names ...string) []NodeInfo {
		var l []NodeInfo
		for _, n := range names {
			l = append(l, NodeInfo{Name: n, Up: true})
		}
		return l
	}
	for _, tc := range []struct {
		name   string
		nodes  []NodeInfo
		vals   map[string]float64
		want   []byte
		lo, hi float64
	}{
		{"empty", nil, nil, []byte{}, 0, 0},
		{"no values", up("a", "b"), nil, []byte{QuantMissing, QuantMissing}, 0, 0},
		{"one value", up("a", "b"), map[string]float64{"a": 7}, []byte{0, QuantMissing}, 7, 7},
		{"equal values", up("a", "b"), map[string]float64{"a": 3, "b": 3}, []byte{0, 0}, 3, 3},
		{"nan and inf are missing", up("a", "b", "c", "d"),
			map[string]float64{"a": math.NaN(), "b": math.Inf(1), "c": -1, "d": 1}, []byte{QuantMissing, QuantMissing, 0, QuantMax}, -1, 1},
		{"quarter steps", up("a", "b", "c"), map[string]float64{"a": 0, "b": 0.25, "c": 1}, []byte{0, 63, QuantMax}, 0, 1},
		{"huge range", up("a", "b"), map[string]float64{"a": -math.MaxFloat64, "b": math.MaxFloat64}, []byte{0, 0}, -math.MaxFloat64, math.MaxFloat64},
	} {
		q := make([]byte, len(tc.nodes))
		lo, hi := Quantise(q, tc.nodes, tc.vals)
		if string(q) != string(tc.want) || lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: Quantise = %v %v..%v, want %v %v..%v", tc.name, q, lo, hi, tc.want, tc.lo, tc.hi)
		}
	}
}

func TestAppendFrameEvent(t *testing.T) {
	dst := []byte("keep:")
	dst = AppendFrameEvent(dst, time.UnixMilli(1700000000123), -0.5, 2, []byte{0, 1, 255})
	want := "keep:event: frame\ndata: {\"t\":1700000000123,\"min\":-0.5,\"max\":2,\"q\":\"AAH/\"}\n\n"
	if string(dst) != want {
		t.Errorf("got %q\nwant %q", dst, want)
	}
}

func TestNaturalCompare(t *testing.T) {
	ordered := []string{"", "a", "a1", "a01", "a2", "a10", "a10b", "b", "cn00002", "cn00010", "cn100", "x99999999999999999999999"}
	for i := range ordered {
		for j := range ordered {
			got := naturalCompare(ordered[i], ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("naturalCompare(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

// FuzzQuantise checks codes stay in range and decode within half a step.
func FuzzQuantise(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 64}, uint8(1))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 248, 127}, uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, downMask uint8) {
		var nodes []NodeInfo
		vals := map[string]float64{}
		for i := 0; i+8 <= len(raw) && i < 8*64; i += 8 {
			var bits uint64
			for k := range 8 {
				bits |= uint64(raw[i+k]) << (8 * k)
			}
			name := fmt.Sprint("n", i/8)
			nodes = append(nodes, NodeInfo{Name: name, Up: downMask&(1<<(i/8%8)) == 0})
			vals[name] = math.Float64frombits(bits)
		}
		q := make([]byte, len(nodes))
		lo, hi := Quantise(q, nodes, vals)
		if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || lo > hi {
			t.Fatalf("range %v..%v", lo, hi)
		}
		span := hi - lo
		for i, n := range nodes {
			v := vals[n.Name]
			switch {
			case !n.Up:
				if q[i] != QuantDown {
					t.Fatalf("down node %d code %d", i, q[i])
				}
			case math.IsNaN(v) || math.IsInf(v, 0):
				if q[i] != QuantMissing {
					t.Fatalf("non-finite node %d code %d", i, q[i])
				}
			case q[i] > QuantMax:
				t.Fatalf("value %v got code %d", v, q[i])
			case !math.IsInf(span, 0) && span > 0:
				if d := math.Abs(Dequantise(q[i], lo, hi) - v); d > span/(2*QuantMax)*1.0001 {
					t.Fatalf("value %v code %d decodes %v off by %v", v, q[i], Dequantise(q[i], lo, hi), d)
				}
			}
		}
		_ = AppendFrameEvent(nil, time.Unix(0, 0), lo, hi, q)
	})
}

// BenchmarkFrame measures one tick's encoding and the wire cost per node.
func BenchmarkFrame(b *testing.B) {
	for _, n := range []int{512, 20000} {
		b.Run(fmt.Sprint("nodes=", n), func(b *testing.B) {
			nodes := make([]NodeInfo, n)
			vals := make(map[string]float64, n)
			for i := range nodes {
				nodes[i] = NodeInfo{Name: fmt.Sprintf("cn%05d", i), Up: i%97 != 0}
				if i%101 != 0 {
					vals[nodes[i].Name] = float64(i%1000) / 1000
				}
			}
			q := make([]byte, n)
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				lo, hi := Quantise(q, nodes, vals)
				buf = AppendFrameEvent(buf[:0], time.Now(), lo, hi, q)
			}
			b.ReportMetric(float64(len(buf))/float64(n), "wire_bytes/node")
		})
	}
}
