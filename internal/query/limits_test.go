package query

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"
)

// A 200 KB query of nested brackets (55 s of parser CPU) and a long chain
// of operators are refused with 400 before the parser sees them; queries
// whose brackets or operators sit in strings or comments are not.
func TestQueryBoundedBeforeParsing(t *testing.T) {
	_, _, mux := fixture(t, Options{MaxQueryLength: 1 << 20})
	for _, tc := range []struct {
		name, qs, want string
	}{
		{"nested parentheses", strings.Repeat("(", 100_000) + "1" + strings.Repeat(")", 100_000), "nested more than 100 deep"},
		{"operator chain", strings.Repeat("up + ", 20_000) + "up", "more than 1000 operators"},
		{"set operator chain", strings.Repeat("up and ", 20_000) + "up", "more than 1000 operators"},
	} {
		start := time.Now()
		code, body := do(t, mux, "POST", "/api/v1/query", url.Values{"query": {tc.qs}})
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%s: refused after %s", tc.name, d)
		}
		if code != http.StatusBadRequest || !strings.Contains(body, `"errorType":"bad_data"`) || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %.200s, want 400 %q", tc.name, code, body, tc.want)
		}
	}

	_, _, mux = fixture(t, Options{})
	code, body := do(t, mux, "POST", "/api/v1/query", url.Values{"query": {strings.Repeat("(", 100_000) + "1" + strings.Repeat(")", 100_000)}})
	if code != http.StatusBadRequest || !strings.Contains(body, "more than the 32768 allowed (query_max_length)") {
		t.Errorf("200 KB query: %d %.200s, want 400 naming query_max_length", code, body)
	}
	ok := `count(up{node=~"((((((((cn01))))))))|x+y-z"} == 1) # ((((((((((((` + strings.Repeat("(", 200) + "\n"
	if code, body := do(t, mux, "GET", "/api/v1/query?time="+at(5)+"&query="+url.QueryEscape(ok), nil); code != 200 || !strings.Contains(body, `"value":[`+at(5)+`,"1"]`) {
		t.Errorf("brackets in a string and a comment: %d %s", code, body)
	}
	if code, _ := do(t, mux, "GET", "/api/v1/series?match[]="+url.QueryEscape(strings.Repeat("{", 200)), nil); code != http.StatusBadRequest {
		t.Errorf("nested match[]: %d, want 400", code)
	}
}

type apiAnswer struct {
	Status   string          `json:"status"`
	Data     json.RawMessage `json:"data"`
	Warnings []string        `json:"warnings"`
}

func answer(t *testing.T, mux http.Handler, target string) ([]json.RawMessage, []string) {
	t.Helper()
	code, body := do(t, mux, "GET", target, nil)
	var a apiAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil || code != 200 {
		t.Fatalf("%s: %d %s", target, code, body)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(a.Data, &items); err != nil {
		t.Fatalf("%s: data %s: %v", target, a.Data, err)
	}
	return items, a.Warnings
}

// series, labels and label values honour the request's limit and the
// server's maximum, whichever is smaller, and warn when they truncate.
func TestMetadataLimits(t *testing.T) {
	_, _, mux := fixture(t, Options{MaxResults: 3})
	all := url.QueryEscape(`{__name__=~".+"}`)
	for _, tc := range []struct {
		target   string
		want     int
		warnings bool
	}{
		{"/api/v1/series?match[]=" + all, 3, true}, // 4 series, server maximum 3
		{"/api/v1/series?match[]=" + all + "&limit=2", 2, true},
		{"/api/v1/series?match[]=" + all + "&limit=10", 3, true},
		{"/api/v1/series?match[]=up", 2, false},
		{"/api/v1/labels", 3, false}, // __name__, node
		{"/api/v1/labels?limit=1", 1, true},
		{"/api/v1/label/node/values?limit=1", 1, true},
		{"/api/v1/label/node/values?limit=2", 2, false},
		{"/api/v1/label/node/values?match[]=up&match[]=node_load1&limit=1", 1, true},
	} {
		items, warnings := answer(t, mux, tc.target)
		if tc.target == "/api/v1/labels" {
			tc.want = 2
		}
		if len(items) != tc.want || (len(warnings) > 0) != tc.warnings {
			t.Errorf("%s: %d items, warnings %q; want %d items, warning %t", tc.target, len(items), warnings, tc.want, tc.warnings)
		}
		if tc.warnings && (len(warnings) != 1 || warnings[0] != "results truncated due to limit") {
			t.Errorf("%s: warnings %q", tc.target, warnings)
		}
	}
}

// blockingQueryable's Select, LabelNames and LabelValues block until their
// context ends, as a slow index scan does; it records that they saw it.
type blockingQueryable struct {
	entered chan string
	ended   chan string
}

func (b *blockingQueryable) Querier(_, _ int64) (storage.Querier, error) {
	return blockingQuerier{b}, nil
}

type blockingQuerier struct{ b *blockingQueryable }

func (q blockingQuerier) wait(ctx context.Context, what string) error {
	q.b.entered <- what
	<-ctx.Done()
	q.b.ended <- what
	return ctx.Err()
}

func (q blockingQuerier) Select(ctx context.Context, _ bool, _ *storage.SelectHints, _ ...*labels.Matcher) storage.SeriesSet {
	return storage.ErrSeriesSet(q.wait(ctx, "select"))
}

func (q blockingQuerier) LabelValues(ctx context.Context, _ string, _ *storage.LabelHints, _ ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, q.wait(ctx, "label values")
}

func (q blockingQuerier) LabelNames(ctx context.Context, _ *storage.LabelHints, _ ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, q.wait(ctx, "label names")
}

func (blockingQuerier) Close() error { return nil }

// A client that goes away stops the storage work of series, labels and
// label values, and frees the query slot.
func TestMetadataCanceledWithClient(t *testing.T) {
	b := &blockingQueryable{entered: make(chan string, 1), ended: make(chan string, 1)}
	a := New(b, Options{MaxConcurrent: 1})
	mux := http.NewServeMux()
	a.Register(mux)
	for _, tc := range []struct{ target, what string }{
		{"/api/v1/series?match[]=up", "select"},
		{"/api/v1/labels", "label names"},
		{"/api/v1/label/node/values", "label values"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			mux.ServeHTTP(rec, httptest.NewRequest("GET", tc.target, nil).WithContext(ctx))
			close(done)
		}()
		if got := <-b.entered; got != tc.what {
			t.Fatalf("%s: storage entered %s", tc.target, got)
		}
		cancel() // the client disconnects
		select {
		case <-b.ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: storage still working after the client left", tc.target)
		}
		<-done
		if rec.Code != statusClientClosed {
			t.Errorf("%s: status %d, want %d", tc.target, rec.Code, statusClientClosed)
		}
		if len(a.heavy.slots) != 0 {
			t.Errorf("%s: query slot still taken", tc.target)
		}
	}
}

// endlessQueryable answers Select with series without end and never looks
// at the context: the API itself must stop iterating.
type endlessQueryable struct{}

func (endlessQueryable) Querier(_, _ int64) (storage.Querier, error) { return endlessQuerier{}, nil }

type endlessQuerier struct{ storage.LabelQuerier }

func (endlessQuerier) Close() error { return nil }
func (endlessQuerier) Select(context.Context, bool, *storage.SelectHints, ...*labels.Matcher) storage.SeriesSet {
	return &endlessSet{}
}

type endlessSet struct{ n int }

func (s *endlessSet) Next() bool { s.n++; return true }
func (s *endlessSet) At() storage.Series {
	return storage.MockSeries(nil, nil, []string{"__name__", "x", "i", string(rune('a' + s.n%26))})
}
func (s *endlessSet) Err() error                        { return nil }
func (s *endlessSet) Warnings() annotations.Annotations { return nil }

func TestSeriesStopsWhenClientLeaves(t *testing.T) {
	a := New(endlessQueryable{}, Options{MaxResults: 1 << 40})
	mux := http.NewServeMux()
	a.Register(mux)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/series?match[]=x", nil).WithContext(ctx))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("series still iterating 5s after the request ended")
	}
	if rec.Code != http.StatusServiceUnavailable && rec.Code != statusClientClosed {
		t.Errorf("status %d, want the request's end", rec.Code)
	}
}

// gatedQueryable holds every Select over more than an hour until the gate
// opens, standing in for heavy queries that saturate the heavy lane.
type gatedQueryable struct {
	storage.Queryable
	gate chan struct{}
}

func (g gatedQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	q, err := g.Queryable.Querier(mint, maxt)
	if err != nil || maxt-mint < time.Hour.Milliseconds() {
		return q, err
	}
	<-g.gate
	return q, nil
}

// While the heavy lane is full and its queue too, a cheap query answers at
// once from the fast lane, and one more heavy query is refused at once
// with 503 and Retry-After rather than waiting out its timeout.
func TestFastLaneWhileHeavySaturated(t *testing.T) {
	_, s, _ := fixture(t, Options{})
	g := gatedQueryable{Queryable: s, gate: make(chan struct{})}
	reg := prometheus.NewRegistry()
	a := New(g, Options{MaxConcurrent: 2, MaxQueued: 3, Registerer: reg})
	mux := http.NewServeMux()
	a.Register(mux)
	heavy := "/api/v1/query_range?query=" + url.QueryEscape("rate(node_load1[5m])") + "&start=" + at(0) + "&end=" + at(7200) + "&step=60"
	var wg sync.WaitGroup
	codes := make(chan int, 5)
	for range 5 {
		wg.Go(func() {
			code, _ := do(t, mux, "GET", heavy, nil)
			codes <- code
		})
	}
	for deadline := time.Now().Add(5 * time.Second); len(a.heavy.slots) < 2 || a.heavy.waiting.Load() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("heavy lane never filled: %d running, %d waiting", len(a.heavy.slots), a.heavy.waiting.Load())
		}
		time.Sleep(time.Millisecond)
	}

	start := time.Now()
	code, body := do(t, mux, "GET", "/api/v1/query?query="+url.QueryEscape("count(up == 1)")+"&time="+at(9), nil)
	if d := time.Since(start); code != 200 || !strings.Contains(body, `"2"`) || d > time.Second {
		t.Errorf("cheap query with the heavy lane full: %d %s after %s", code, body, d)
	}

	req := httptest.NewRequest("GET", heavy, nil)
	rec := httptest.NewRecorder()
	start = time.Now()
	mux.ServeHTTP(rec, req)
	if d := time.Since(start); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		!strings.Contains(rec.Body.String(), `"errorType":"unavailable"`) || d > 100*time.Millisecond {
		t.Errorf("heavy query beyond the queue: %d Retry-After %q %s after %s, want 503 at once",
			rec.Code, rec.Header().Get("Retry-After"), rec.Body, d)
	}
	if got := testutil.ToFloat64(a.metrics.refused.WithLabelValues("heavy_queue_full")); got != 1 {
		t.Errorf("vigil_query_refused_total{reason=heavy_queue_full} = %g, want 1", got)
	}

	close(g.gate)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != 200 {
			t.Errorf("queued heavy query: %d", code)
		}
	}
}

// A query the fast lane takes for cheap but that needs more samples than
// it allows is answered by the heavy lane.
func TestFastLaneOverflowRunsHeavy(t *testing.T) {
	a, _, mux := fixture(t, Options{FastMaxSamples: 2})
	code, body := do(t, mux, "GET", "/api/v1/query?query="+url.QueryEscape("node_load1[1m]")+"&time="+at(9), nil)
	if code != 200 || !strings.Contains(body, `"resultType":"matrix"`) {
		t.Errorf("%d %s", code, body)
	}
	if got := testutil.ToFloat64(a.metrics.retried); got != 1 {
		t.Errorf("overflows %g, want 1", got)
	}
	if len(a.heavy.slots) != 0 || len(a.fastLane.slots) != 0 {
		t.Error("query slot still taken")
	}
}

// MaxSamples bounds range queries on every path Range takes: sharded by
// series, split by steps, and whole.
func TestRangeMaxSamplesAllPaths(t *testing.T) {
	s := counters(t)
	start, end := base.Add(2*time.Minute), base.Add(time.Hour)
	for _, qs := range []string{
		`rate(node_context_switches_total[1m])`,                          // by series
		`sum(rate(node_context_switches_total[1m]))`,                     // by steps
		`sum(count_over_time(node_context_switches_total[30m] @ end()))`, // whole
	} {
		a := New(s, Options{MaxSamples: 500})
		res, done, err := a.Range(context.Background(), qs, start, end, 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := res.Err.(promql.ErrTooManySamples); !ok {
			t.Errorf("%s: error %v, want too many samples", qs, res.Err)
		}
		done()
	}
}

// countingWriter counts the writes of a response.
type countingWriter struct {
	*httptest.ResponseRecorder
	writes int
}

func (c *countingWriter) Write(b []byte) (int, error) { c.writes++; return c.ResponseRecorder.Write(b) }

// A large result is written out as it is encoded, not held whole as JSON
// beside the values, and reads the same.
func TestLargeResultStreamed(t *testing.T) {
	m := make(promql.Matrix, 20)
	for i := range m {
		m[i].Metric = labels.FromStrings("__name__", "x", "i", string(rune('a'+i)))
		for j := range 5000 {
			m[i].Floats = append(m[i].Floats, promql.FPoint{T: int64(j) * 1000, F: float64(i*j) / 7})
		}
	}
	a := New(endlessQueryable{}, Options{})
	w := &countingWriter{ResponseRecorder: httptest.NewRecorder()}
	a.writeResult(w, m, []string{"w"}, nil)
	want := string(appendResult(append([]byte(`{"status":"success","data":`), nil...), m, nil)) + `,"warnings":["w"]}`
	if got := w.Body.String(); got != want {
		t.Errorf("streamed body differs from the whole encoding (%d vs %d bytes)", len(got), len(want))
	}
	if w.writes < w.Body.Len()/flushSize {
		t.Errorf("%d writes for %d bytes, want one per %d", w.writes, w.Body.Len(), flushSize)
	}
}
