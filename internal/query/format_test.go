package query

import (
	"net/url"
	"strings"
	"testing"
)

func TestFormatQuery(t *testing.T) {
	_, _, mux := fixture(t, Options{})
	for _, tc := range []struct {
		method, query string
		code          int
		want          string
	}{
		{"GET", `sum by(node)(rate(node_cpu_seconds_total{mode!="idle",instance="cn01"}[5m]))`, 200,
			`{"status":"success","data":"sum by (node) (rate(node_cpu_seconds_total{instance=\"cn01\",mode!=\"idle\"}[5m]))"}`},
		{"POST", `1+  node_load1 # comment`, 200, `{"status":"success","data":"1 + node_load1"}`},
		{"GET", `sum(`, 400, `"errorType":"bad_data"`},
		{"GET", ``, 400, `no query given`},
		{"GET", strings.Repeat("(", 500) + "1" + strings.Repeat(")", 500), 400, `nested more than`},
	} {
		var code int
		var body string
		if tc.method == "POST" {
			code, body = do(t, mux, "POST", "/api/v1/format_query", url.Values{"query": {tc.query}})
		} else {
			code, body = do(t, mux, "GET", "/api/v1/format_query?query="+url.QueryEscape(tc.query), nil)
		}
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s %q: %d %s, want %d with %s", tc.method, tc.query, code, body, tc.code, tc.want)
		}
	}
}
