package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// maxResponse bounds what the client reads from a server.
const maxResponse = 256 << 20

// Client queries a Prometheus-compatible HTTP API (vigil server or
// Prometheus itself).
type Client struct {
	// Server is the base URL, e.g. http://localhost:9090.
	Server string
	HTTP   *http.Client
}

// Response is the decoded envelope of an API answer.
type Response struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
	// Raw is the body as received.
	Raw []byte `json:"-"`
}

// APIError is an error answer of the server.
type APIError struct {
	Status    int
	ErrorType string
	Message   string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.ErrorType, e.Message)
}

// Instant runs an instant query at ts.
func (c *Client) Instant(ctx context.Context, expr string, ts time.Time) (*Response, error) {
	return c.post(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {formatTime(ts)}})
}

// Range runs a range query.
func (c *Client) Range(ctx context.Context, expr string, start, end time.Time, step time.Duration) (*Response, error) {
	return c.post(ctx, "/api/v1/query_range", url.Values{
		"query": {expr}, "start": {formatTime(start)}, "end": {formatTime(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	})
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

func (c *Client) post(ctx context.Context, path string, form url.Values) (*Response, error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	u := strings.TrimRight(c.Server, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", u, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("read answer of %s: %w", req.URL.Redacted(), err)
	}
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("answer of %s (HTTP %d) is not API JSON: %w", req.URL.Redacted(), resp.StatusCode, err)
	}
	r.Raw = body
	if r.Status != "success" {
		return &r, &APIError{Status: resp.StatusCode, ErrorType: r.ErrorType, Message: r.Error}
	}
	return &r, nil
}

type jsonSeries struct {
	Metric map[string]string   `json:"metric"`
	Value  []json.RawMessage   `json:"value"`
	Values [][]json.RawMessage `json:"values"`
}

// WriteTable prints a result readably: an instant vector as one row per
// series, a matrix as series × time, a scalar or string as one value.
func WriteTable(w io.Writer, r *Response) error {
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return fmt.Errorf("decode result: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch d.ResultType {
	case "scalar", "string":
		var p []json.RawMessage
		if err := json.Unmarshal(d.Result, &p); err != nil || len(p) != 2 {
			return fmt.Errorf("decode %s result: malformed point", d.ResultType)
		}
		fmt.Fprintf(tw, "%s\n", unquote(p[1]))
	case "vector", "matrix":
		var ss []jsonSeries
		if err := json.Unmarshal(d.Result, &ss); err != nil {
			return fmt.Errorf("decode %s result: %w", d.ResultType, err)
		}
		if d.ResultType == "vector" {
			writeVector(tw, ss)
		} else if err := writeMatrix(tw, ss); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown result type %q", d.ResultType)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(tw, "warning: %s\n", wn)
	}
	return tw.Flush()
}

func writeVector(w io.Writer, ss []jsonSeries) {
	sort.Slice(ss, func(i, j int) bool { return seriesName(ss[i].Metric) < seriesName(ss[j].Metric) })
	fmt.Fprintln(w, "SERIES\tVALUE")
	for _, s := range ss {
		v := "?"
		if len(s.Value) == 2 {
			v = unquote(s.Value[1])
		}
		fmt.Fprintf(w, "%s\t%s\n", seriesName(s.Metric), v)
	}
	if len(ss) == 0 {
		fmt.Fprintln(w, "(no data)")
	}
}

func writeMatrix(w io.Writer, ss []jsonSeries) error {
	sort.Slice(ss, func(i, j int) bool { return seriesName(ss[i].Metric) < seriesName(ss[j].Metric) })
	// Columns are the union of all timestamps, in order.
	var times []float64
	seen := map[string]bool{}
	rows := make([]map[string]string, len(ss))
	for i, s := range ss {
		rows[i] = map[string]string{}
		for _, p := range s.Values {
			if len(p) != 2 {
				return errors.New("decode matrix result: malformed point")
			}
			key := string(p[0])
			t, err := strconv.ParseFloat(key, 64)
			if err != nil {
				return fmt.Errorf("decode matrix result: timestamp %s: %w", key, err)
			}
			if !seen[key] {
				seen[key] = true
				times = append(times, t)
			}
			rows[i][key] = unquote(p[1])
		}
	}
	sort.Float64s(times)
	keys := make([]string, len(times))
	fmt.Fprint(w, "SERIES")
	for i, t := range times {
		keys[i] = strconv.FormatFloat(t, 'f', -1, 64)
		tm := time.UnixMilli(int64(t * 1000)).UTC()
		fmt.Fprintf(w, "\t%s", tm.Format("15:04:05"))
	}
	fmt.Fprintln(w)
	for i, s := range ss {
		fmt.Fprint(w, seriesName(s.Metric))
		for _, k := range keys {
			v, ok := rows[i][k]
			if !ok {
				v = "-"
			}
			fmt.Fprintf(w, "\t%s", v)
		}
		fmt.Fprintln(w)
	}
	if len(ss) == 0 {
		fmt.Fprintln(w, "(no data)")
	}
	return nil
}

// seriesName renders name{a="b",...} with labels sorted.
func seriesName(m map[string]string) string {
	names := make([]string, 0, len(m))
	for k := range m {
		if k != "__name__" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(m["__name__"])
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

func unquote(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}
