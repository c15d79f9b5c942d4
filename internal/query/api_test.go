package query

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/buildinfo"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

var (
	base  = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	baseS = strconv.FormatInt(base.Unix(), 10)
	load1 = metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
)

func at(sec int) string { return strconv.FormatInt(base.Unix()+int64(sec), 10) }

// fixture stores node_load1 for cn01 (value = second) and cn02 (value =
// 100 + second) every second for ten seconds, plus up for both.
func fixture(t testing.TB, opts Options) (*API, *store.Store, *http.ServeMux) {
	t.Helper()
	s, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 10 {
		ts := base.Add(time.Duration(i) * time.Second)
		for n, node := range []string{"cn01", "cn02"} {
			if err := s.AppendTick(node, ts, []*metric.Desc{load1}, []float64{float64(i + 100*n)}, false); err != nil {
				t.Fatal(err)
			}
			if err := s.SetUp(node, ts, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if opts.Metadata == nil {
		opts.Metadata = func() map[string]Metadata {
			out := map[string]Metadata{}
			for k, v := range s.Metadata() {
				out[k] = Metadata{Type: v.Type, Help: v.Help, Unit: v.Unit}
			}
			return out
		}
	}
	a := New(s, opts)
	mux := http.NewServeMux()
	a.Register(mux)
	return a, s, mux
}

func do(t testing.TB, mux http.Handler, method, target string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusMethodNotAllowed && ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, target, ct)
	}
	b := rec.Body.String()
	if rec.Code != http.StatusMethodNotAllowed && !json.Valid([]byte(b)) {
		t.Errorf("%s %s: invalid JSON %s", method, target, b)
	}
	return rec.Code, b
}

func TestEndpoints(t *testing.T) {
	_, _, mux := fixture(t, Options{})
	t5 := at(5)
	v := url.QueryEscape
	for _, tc := range []struct {
		name, target string
		code         int
		want         string
	}{
		{"instant vector", "/api/v1/query?query=node_load1&time=" + t5, 200,
			`{"status":"success","data":{"resultType":"vector","result":[` +
				`{"metric":{"__name__":"node_load1","node":"cn01"},"value":[` + t5 + `,"5"]},` +
				`{"metric":{"__name__":"node_load1","node":"cn02"},"value":[` + t5 + `,"105"]}]}}`},
		{"instant with fraction", "/api/v1/query?query=" + v(`sum(up)`) + "&time=" + t5 + ".25", 200,
			`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[` + t5 + `.25,"2"]}]}}`},
		{"scalar", "/api/v1/query?query=" + v("1/0") + "&time=" + t5, 200,
			`{"status":"success","data":{"resultType":"scalar","result":[` + t5 + `,"+Inf"]}}`},
		{"string", "/api/v1/query?query=" + v(`"a\"b"`) + "&time=" + t5, 200,
			`{"status":"success","data":{"resultType":"string","result":[` + t5 + `,"a\"b"]}}`},
		{"range", "/api/v1/query_range?query=" + v(`node_load1{node="cn02"}`) + "&start=" + at(2) + "&end=" + at(4) + "&step=1", 200,
			`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"node_load1","node":"cn02"},"values":[[` +
				at(2) + `,"102"],[` + at(3) + `,"103"],[` + at(4) + `,"104"]]}]}}`},
		{"range rfc3339 and duration step", "/api/v1/query_range?query=" + v(`up{node="cn01"}`) + "&start=" + v(base.Format(time.RFC3339)) +
			"&end=" + v(base.Add(4*time.Second).Format(time.RFC3339)) + "&step=2s", 200,
			`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up","node":"cn01"},"values":[[` +
				at(0) + `,"1"],[` + at(2) + `,"1"],[` + at(4) + `,"1"]]}]}}`},
		{"series", "/api/v1/series?match[]=" + v(`{node="cn01"}`), 200,
			`{"status":"success","data":[{"__name__":"node_load1","node":"cn01"},{"__name__":"up","node":"cn01"}]}`},
		{"series two selectors", "/api/v1/series?match[]=" + v(`up{node="cn02"}`) + "&match[]=" + v(`node_load1{node="cn01"}`), 200,
			`{"status":"success","data":[{"__name__":"node_load1","node":"cn01"},{"__name__":"up","node":"cn02"}]}`},
		{"series limit", "/api/v1/series?limit=1&match[]=up", 200,
			`{"status":"success","data":[{"__name__":"up","node":"cn01"}],"warnings":["results truncated due to limit"]}`},
		{"labels", "/api/v1/labels", 200, `{"status":"success","data":["__name__","node"]}`},
		{"labels outside range", "/api/v1/labels?start=0&end=1", 200, `{"status":"success","data":[]}`},
		{"label values", "/api/v1/label/node/values", 200, `{"status":"success","data":["cn01","cn02"]}`},
		{"metric names", "/api/v1/label/__name__/values?match[]=" + v(`{node="cn01"}`), 200, `{"status":"success","data":["node_load1","up"]}`},
		{"metadata", "/api/v1/metadata", 200,
			`{"status":"success","data":{"node_load1":[{"type":"gauge","help":"1m load average.","unit":""}]}}`},
		{"metadata other metric", "/api/v1/metadata?metric=nope", 200, `{"status":"success","data":{}}`},
		{"exemplars", "/api/v1/query_exemplars?query=up", 200, `{"status":"success","data":[]}`},
		{"buildinfo", "/api/v1/status/buildinfo", 200,
			`{"status":"success","data":{"version":"` + PrometheusAPIVersion + `","revision":"` + buildinfo.Revision +
				`","branch":"","buildUser":"","buildDate":"","goVersion":"` + runtime.Version() +
				`","application":"vigil","vigilVersion":"` + buildinfo.Version + `"}}`},

		{"bad query", "/api/v1/query?query=" + v("sum(") + "&time=" + t5, 400, `bad_data`},
		{"no query", "/api/v1/query", 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": no query given"}`},
		{"bad time", "/api/v1/query?query=up&time=yesterday", 400,
			`{"status":"error","errorType":"bad_data","error":"invalid parameter \"time\": cannot parse \"yesterday\" to a valid timestamp"}`},
		{"bad timeout", "/api/v1/query?query=up&timeout=-1", 400, `bad_data`},
		{"range no step", "/api/v1/query_range?query=up&start=1&end=2", 400,
			`{"status":"error","errorType":"bad_data","error":"invalid parameter \"step\": missing"}`},
		{"range end before start", "/api/v1/query_range?query=up&start=2&end=1&step=1", 400, `end timestamp must not be before start time`},
		{"range zero step", "/api/v1/query_range?query=up&start=1&end=2&step=0", 400, `zero or negative query resolution`},
		{"range too many points", "/api/v1/query_range?query=up&start=0&end=100000&step=1", 400, `exceeded maximum resolution of 11000 points`},
		{"range bad query", "/api/v1/query_range?query=" + v("up[") + "&start=1&end=2&step=1", 400, `"errorType":"bad_data"`},
		{"range vector at top level", "/api/v1/query_range?query=" + v("up[1m]") + "&start=1&end=2&step=1", 400, `bad_data`},
		{"series without match", "/api/v1/series", 400,
			`{"status":"error","errorType":"bad_data","error":"no match[] parameter provided"}`},
		{"series bad match", "/api/v1/series?match[]=" + v("{"), 400, `"errorType":"bad_data","error":"invalid parameter \"match[]\": `},
		{"labels bad limit", "/api/v1/labels?limit=x", 400, `invalid parameter \"limit\"`},
		{"label values bad start", "/api/v1/label/node/values?start=x", 400, `invalid parameter \"start\"`},
		{"metadata bad limit", "/api/v1/metadata?limit=x", 400, `bad_data`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := do(t, mux, "GET", tc.target, nil)
			if code != tc.code {
				t.Errorf("status %d, want %d; body %s", code, tc.code, body)
			}
			if tc.code == 200 && body != tc.want || tc.code != 200 && !strings.Contains(body, tc.want) {
				t.Errorf("body\n%s\nwant\n%s", body, tc.want)
			}
			if tc.code != 200 && !strings.HasPrefix(body, `{"status":"error","errorType":"`) {
				t.Errorf("error body %s lacks the Prometheus error shape", body)
			}
		})
	}
}

func TestPostForm(t *testing.T) {
	_, _, mux := fixture(t, Options{})
	form := url.Values{"query": {`node_load1{node="cn01"}`}, "time": {at(3)}}
	code, body := do(t, mux, "POST", "/api/v1/query", form)
	want := `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"node_load1","node":"cn01"},"value":[` + at(3) + `,"3"]}]}}`
	if code != 200 || body != want {
		t.Errorf("POST query: %d %s", code, body)
	}
	form = url.Values{"query": {`count(up)`}, "start": {at(0)}, "end": {at(1)}, "step": {"1"}}
	code, body = do(t, mux, "POST", "/api/v1/query_range", form)
	if code != 200 || !strings.Contains(body, `"values":[[`+at(0)+`,"2"],[`+at(1)+`,"2"]]`) {
		t.Errorf("POST query_range: %d %s", code, body)
	}
	code, body = do(t, mux, "POST", "/api/v1/series", url.Values{"match[]": {"up"}})
	if code != 200 || !strings.Contains(body, `{"__name__":"up","node":"cn02"}`) {
		t.Errorf("POST series: %d %s", code, body)
	}
	if code, _ := do(t, mux, "DELETE", "/api/v1/query", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d, want 405", code)
	}
}

func TestMaxSamplesIsExecutionError(t *testing.T) {
	_, _, mux := fixture(t, Options{MaxSamples: 5})
	code, body := do(t, mux, "GET", "/api/v1/query?query="+url.QueryEscape("node_load1[1m]")+"&time="+at(9), nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, `"errorType":"execution"`) || !strings.Contains(body, "too many samples") {
		t.Errorf("got %d %s, want 422 execution too many samples", code, body)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	a, _, mux := fixture(t, Options{MaxConcurrent: 1, MaxQueued: 1})
	heavy := "/api/v1/query_range?query=node_load1&start=" + at(0) + "&end=" + at(3600) + "&step=60"
	a.heavy.slots <- struct{}{} // a query in progress holds the only slot
	code, body := do(t, mux, "GET", heavy+"&timeout=0.05", nil)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"errorType":"timeout"`) {
		t.Errorf("with no free slot: %d %s, want 503 timeout", code, body)
	}
	<-a.heavy.slots
	if code, body := do(t, mux, "GET", heavy, nil); code != 200 {
		t.Errorf("after release: %d %s", code, body)
	}
}

// TestGapIsMissingData checks the store's gap record through PromQL:
// inside the gap the node has no value, not its last one carried forward.
func TestGapIsMissingData(t *testing.T) {
	_, s, mux := fixture(t, Options{})
	if err := s.Gap("cn01", base.Add(10*time.Second), base.Add(60*time.Second)); err != nil {
		t.Fatal(err)
	}
	q := "/api/v1/query?query=" + url.QueryEscape(`node_load1`) + "&time=" + at(30)
	_, body := do(t, mux, "GET", q, nil)
	if strings.Contains(body, `"cn01"`) || !strings.Contains(body, `"node":"cn02"},"value":[`+at(30)+`,"109"]`) {
		t.Errorf("inside cn01's gap: %s; want only cn02, carried forward", body)
	}
	q = "/api/v1/query_range?query=" + url.QueryEscape(`up{node="cn01"}`) + "&start=" + at(8) + "&end=" + at(12) + "&step=1"
	_, body = do(t, mux, "GET", q, nil)
	if !strings.Contains(body, `"values":[[`+at(8)+`,"1"],[`+at(9)+`,"1"]]`) {
		t.Errorf("range over the gap start: %s, want points at 8s and 9s only", body)
	}
}

func TestParseTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // ms
		ok   bool
	}{
		{"1700000000", 1700000000000, true},
		{"1700000000.1234", 1700000000123, true},
		{"-1.5", -1500, true},
		{"2026-11-22T12:00:00Z", base.UnixMilli(), true},
		{"2026-11-22T13:00:00.5+01:00", base.UnixMilli() + 500, true},
		{minTimeText, minTime.UnixMilli(), true},
		{maxTimeText, maxTime.UnixMilli(), true},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"1e300", 0, false},
		{"", 0, false},
		{"12:00", 0, false},
	} {
		got, err := ParseTime(tc.in)
		if (err == nil) != tc.ok || tc.ok && got.UnixMilli() != tc.want {
			t.Errorf("ParseTime(%q) = %d, %v; want %d ok=%v", tc.in, got.UnixMilli(), err, tc.want, tc.ok)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"15", 15 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"1m30s", 90 * time.Second, true},
		{"2h", 2 * time.Hour, true},
		{"1e30", 0, false},
		{"NaN", 0, false},
		{"5 minutes", 0, false},
	} {
		got, err := ParseDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestAppendTimestampAndValue(t *testing.T) {
	for _, tc := range []struct {
		ms   int64
		want string
	}{{0, "0"}, {1500, "1.5"}, {1001, "1.001"}, {1010, "1.01"}, {-1500, "-1.5"}, {1700000000123, "1700000000.123"}} {
		if got := string(appendTimestamp([]byte("x"), tc.ms)); got != "x"+tc.want {
			t.Errorf("appendTimestamp(%d) = %s, want x%s", tc.ms, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{{1, `"1"`}, {0.1, `"0.1"`}, {1e21, `"1000000000000000000000"`}, {math.NaN(), `"NaN"`}, {math.Inf(-1), `"-Inf"`}} {
		if got := string(appendValue(nil, tc.v)); got != tc.want {
			t.Errorf("appendValue(%v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"1700000000.123", "2026-11-22T12:00:00Z", "-1e15", "NaN", minTimeText} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s)
		if err == nil && got.IsZero() && s != "0001-01-01T00:00:00Z" {
			// Zero time is only reachable by saying so.
			if _, perr := time.Parse(time.RFC3339Nano, s); perr != nil {
				t.Errorf("ParseTime(%q) = zero time without error", s)
			}
		}
		if _, err := ParseDuration(s); err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
			t.Errorf("ParseDuration(%q) error %q does not quote the input", s, err)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\n\t", "h\xffé", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString([]byte("x"), s)
		if b[0] != 'x' {
			t.Fatal("prefix overwritten")
		}
		var got string
		if err := json.Unmarshal(b[1:], &got); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", s, b[1:], err)
		}
		// Each invalid byte becomes one U+FFFD, as ranging over a string does.
		var want strings.Builder
		for _, r := range s {
			want.WriteRune(r)
		}
		if got != want.String() {
			t.Errorf("round trip of %q gave %q", s, got)
		}
	})
}

// BenchmarkQueryRange runs an hour of one metric at 10 s resolution for
// many nodes through the HTTP handler, JSON included.
func BenchmarkQueryRange(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			s, err := store.Open(store.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			names := make([]string, nodes)
			for i := range names {
				names[i] = fmt.Sprintf("cn%05d", i)
			}
			descs := []*metric.Desc{load1}
			vals := []float64{0}
			const interval, span = 10 * time.Second, time.Hour
			for ts := base; ts.Before(base.Add(span)); ts = ts.Add(interval) {
				for i, n := range names {
					vals[0] = float64(i) + float64(ts.Unix()%60)
					if err := s.AppendTick(n, ts, descs, vals, false); err != nil {
						b.Fatal(err)
					}
				}
			}
			a := New(s, Options{})
			mux := http.NewServeMux()
			a.Register(mux)
			target := "/api/v1/query_range?query=node_load1&start=" + baseS + "&end=" + at(int(span/time.Second)) + "&step=10"
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest("GET", target, nil)
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Body.String())
				}
			}
			b.ReportMetric(float64(b.N)*float64(nodes)*float64(span/interval+1)/b.Elapsed().Seconds(), "points/s")
		})
	}
}
