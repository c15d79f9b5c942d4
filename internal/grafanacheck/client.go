package grafanacheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// Client calls a Prometheus HTTP API v1 (Vigil's or Prometheus's).
type Client struct {
	Base string // e.g. http://127.0.0.1:9090
	HTTP *http.Client
}

// maxAnswerBytes bounds one answer.
const maxAnswerBytes = 64 << 20

// Series is one result series: its labels and its points.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Point is one sample of a result.
type Point struct {
	T float64 // seconds
	V float64
}

// APIError is an error answer of the API (or a failed request).
type APIError struct {
	Status int
	Type   string
	Msg    string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Type, e.Msg) }

func (c *Client) get(ctx context.Context, path string, form url.Values, data any) error {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	// GET, as Prometheus serves every endpoint used here on GET.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path+"?"+form.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return &APIError{Type: "request", Msg: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return &APIError{Status: resp.StatusCode, Type: "read", Msg: err.Error()}
	}
	if len(body) > maxAnswerBytes {
		return &APIError{Status: resp.StatusCode, Type: "too_large", Msg: fmt.Sprintf("answer over %d bytes", maxAnswerBytes)}
	}
	var env struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return &APIError{Status: resp.StatusCode, Type: "json", Msg: fmt.Sprintf("%v: %.200s", err, body)}
	}
	if env.Status != "success" {
		return &APIError{Status: resp.StatusCode, Type: env.ErrorType, Msg: env.Error}
	}
	if err := json.Unmarshal(env.Data, data); err != nil {
		return &APIError{Status: resp.StatusCode, Type: "json", Msg: err.Error()}
	}
	return nil
}

func unixParam(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

type result struct {
	ResultType string `json:"resultType"`
	Result     json.RawMessage
}

// decode turns a vector, matrix or scalar answer into series.
func (r result) decode() ([]Series, error) {
	type sample [2]any
	parse := func(s sample) (Point, error) {
		t, ok := s[0].(float64)
		vs, ok2 := s[1].(string)
		if !ok || !ok2 {
			return Point{}, fmt.Errorf("bad sample %v", s)
		}
		v, err := strconv.ParseFloat(vs, 64)
		return Point{t, v}, err
	}
	var out []Series
	switch r.ResultType {
	case "vector":
		var vs []struct {
			Metric map[string]string
			Value  sample
		}
		if err := json.Unmarshal(r.Result, &vs); err != nil {
			return nil, err
		}
		for _, v := range vs {
			p, err := parse(v.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, Series{Labels: v.Metric, Points: []Point{p}})
		}
	case "matrix":
		var ms []struct {
			Metric map[string]string
			Values []sample
		}
		if err := json.Unmarshal(r.Result, &ms); err != nil {
			return nil, err
		}
		for _, m := range ms {
			s := Series{Labels: m.Metric}
			for _, smp := range m.Values {
				p, err := parse(smp)
				if err != nil {
					return nil, err
				}
				s.Points = append(s.Points, p)
			}
			out = append(out, s)
		}
	case "scalar":
		var s sample
		if err := json.Unmarshal(r.Result, &s); err != nil {
			return nil, err
		}
		p, err := parse(s)
		if err != nil {
			return nil, err
		}
		out = append(out, Series{Labels: map[string]string{}, Points: []Point{p}})
	default:
		return nil, fmt.Errorf("result type %q", r.ResultType)
	}
	return out, nil
}

// Instant evaluates expr at t.
func (c *Client) Instant(ctx context.Context, expr string, t time.Time) ([]Series, error) {
	var r result
	if err := c.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unixParam(t)}}, &r); err != nil {
		return nil, err
	}
	return r.decode()
}

// Range evaluates expr from start to end every step.
func (c *Client) Range(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	var r result
	form := url.Values{"query": {expr}, "start": {unixParam(start)}, "end": {unixParam(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	if err := c.get(ctx, "/api/v1/query_range", form, &r); err != nil {
		return nil, err
	}
	return r.decode()
}

// LabelValues answers label_values(match, label) as Grafana's Prometheus
// data source does: the label's values among the series match selects
// in the range, sorted.
func (c *Client) LabelValues(ctx context.Context, label, match string, start, end time.Time) ([]string, error) {
	form := url.Values{"start": {unixParam(start)}, "end": {unixParam(end)}}
	if match != "" {
		form["match[]"] = []string{match}
	}
	var vs []string
	if err := c.get(ctx, "/api/v1/label/"+url.PathEscape(label)+"/values", form, &vs); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, v := range vs {
		set[v] = true
	}
	return slices.Sorted(maps.Keys(set)), nil
}
