package web

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fakeCluster is a deterministic stand-in for the query side in browser
// tests: a Source over n nodes plus just enough of the Prometheus HTTP API
// (query, query_range) for the node view and Explore. Every 37th node is
// down and every 53rd has no value, so both special cells show up.
type fakeCluster struct {
	names []string
	index map[string]int
}

func newFakeCluster(n int) *fakeCluster {
	c := &fakeCluster{index: make(map[string]int, n)}
	for i := range n {
		name := fmt.Sprintf("cn%05d", i+1)
		c.names = append(c.names, name)
		c.index[name] = i
	}
	return c
}

func (c *fakeCluster) down(i int) bool    { return i%37 == 36 }
func (c *fakeCluster) missing(i int) bool { return i%53 == 52 }

// value is a smooth per-node signal that moves every second, so every live
// frame changes most cells (the worst case for the heatmap).
func (c *fakeCluster) value(i int, metric string, t time.Time) float64 {
	h := fnv.New32a()
	h.Write([]byte(metric))
	phase := float64(h.Sum32()%1000)/159.0 + float64(i)*0.37
	s := float64(t.UnixMilli()) / 1000
	x := 0.5 + 0.45*math.Sin(s/7+phase)*math.Cos(float64(i%17)/5)
	switch metric {
	case "load":
		return x * 64
	case "net", "disk":
		return x * 1.2e9
	}
	return x
}

func metricOf(expr string) string {
	switch {
	case strings.Contains(expr, "idle"):
		return "cpu"
	case strings.Contains(expr, "MemAvailable"):
		return "mem"
	case strings.Contains(expr, "node_load"):
		return "load"
	case strings.Contains(expr, "network"):
		return "net"
	case strings.Contains(expr, "disk"):
		return "disk"
	}
	return "other"
}

func (c *fakeCluster) NodeValues(ctx context.Context, expr string, t time.Time) (map[string]float64, error) {
	if strings.Count(expr, "(") != strings.Count(expr, ")") {
		return nil, fmt.Errorf("1:%d: parse error: unclosed left parenthesis: %w", len(expr), ErrBadQuery)
	}
	m := metricOf(expr)
	out := make(map[string]float64, len(c.names))
	for i, n := range c.names {
		if !c.missing(i) {
			out[n] = c.value(i, m, t)
		}
	}
	return out, nil
}

func (c *fakeCluster) Nodes(ctx context.Context) ([]NodeInfo, error) {
	l := make([]NodeInfo, len(c.names))
	for i, n := range c.names {
		l[i] = NodeInfo{Name: n, Up: !c.down(i)}
	}
	return l, nil
}

func (c *fakeCluster) Tree(ctx context.Context) (any, error) {
	kid := func(name string, up bool, lag float64, drops int, nodes int) map[string]any {
		return map[string]any{"name": name, "up": up, "lag_seconds": lag, "drops": drops, "nodes": nodes}
	}
	var down []any
	for i, n := range c.names {
		if c.down(i) {
			down = append(down, n)
		}
	}
	return map[string]any{
		"name": "server", "up": true, "lag_seconds": 0.2, "drops": 0,
		// As treestatus.Tree: the down nodes, by name and as host ranges.
		"nodes_down": len(down), "down": down, "down_ranges": down,
		// As treestatus.Tree: nodes whose clocks are off, largest first.
		"nodes_clock_skew": 2,
		"clock_skew":       []any{map[string]any{"node": "cn00099", "offset_seconds": 7200.4}, map[string]any{"node": "cn00100", "offset_seconds": -3600}},
		"children": []any{
			map[string]any{"name": "agg-a", "up": true, "lag_seconds": 0.4, "drops": 0,
				"children": []any{kid("rack00", true, 0.5, 0, 32), kid("rack01", true, 0.6, 3, 32)}},
			map[string]any{"name": "agg-b", "up": false, "lag_seconds": 12.5, "drops": 1742,
				"children": []any{kid("rack02", false, 30, 900, 32)}},
		},
	}, nil
}

var nodeMatcher = regexp.MustCompile(`node="([^"]*)"`)

type promSeries struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values,omitempty"`
	Value  *[2]any           `json:"value,omitempty"`
}

// ServeHTTP answers /api/v1/query and /api/v1/query_range.
func (c *fakeCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	q := r.Form.Get("query")
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/series") {
		// The node view asks whether its node exists: up{node="X"}.
		out := []map[string]string{}
		for _, m := range r.Form["match[]"] {
			if n := nodeMatcher.FindStringSubmatch(m); n != nil && slices.Contains(c.names, n[1]) {
				out = append(out, map[string]string{"__name__": "up", "node": n[1]})
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": out})
		return
	}
	if strings.Count(q, "(") != strings.Count(q, ")") || q == "" {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data",
			"error": "1:" + strconv.Itoa(len(q)) + ": parse error: unclosed left parenthesis"})
		return
	}
	node := ""
	if m := nodeMatcher.FindStringSubmatch(q); m != nil {
		node = m[1]
	}
	var series []promSeries
	var typ string
	if strings.HasSuffix(r.URL.Path, "/query_range") {
		typ = "matrix"
		start, _ := strconv.ParseFloat(r.Form.Get("start"), 64)
		end, _ := strconv.ParseFloat(r.Form.Get("end"), 64)
		step, _ := strconv.ParseFloat(r.Form.Get("step"), 64)
		if step <= 0 || end < start || (end-start)/step > 11000 {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": "bad_data", "error": "bad range"})
			return
		}
		for _, lbl := range c.seriesFor(q, node) {
			s := promSeries{Metric: lbl}
			key := fmt.Sprint(lbl)
			i := c.index[node]
			for ts := start; ts <= end; ts += step {
				// Slowed down 60x so an hour reads like a work day.
				v := c.value(i, key, time.UnixMilli(int64(ts*1000/60)))
				if strings.HasPrefix(q, "up") {
					// Down for a stretch in every hour.
					v = 1
					if int(ts)%3600 < 600 {
						v = 0
					}
				}
				s.Values = append(s.Values, [2]any{ts, strconv.FormatFloat(v*scaleOf(q), 'g', 6, 64)})
			}
			series = append(series, s)
		}
	} else {
		typ = "vector"
		t, err := strconv.ParseFloat(r.Form.Get("time"), 64)
		if err != nil {
			t = float64(time.Now().Unix())
		}
		switch {
		case strings.Contains(q, "vigil_process"):
			series = c.processes(q, node, t)
		case node != "":
			for _, lbl := range c.seriesFor(q, node) {
				v := [2]any{t, strconv.FormatFloat(c.value(c.index[node], fmt.Sprint(lbl), time.Unix(int64(t), 0)), 'g', 6, 64)}
				if strings.HasPrefix(q, "up") {
					v[1] = "1"
				}
				series = append(series, promSeries{Metric: lbl, Value: &v})
			}
		default:
			m := metricOf(q)
			for i, n := range c.names {
				if c.missing(i) {
					continue
				}
				v := [2]any{t, strconv.FormatFloat(c.value(i, m, time.Unix(int64(t), 0)), 'g', 6, 64)}
				series = append(series, promSeries{Metric: map[string]string{"__name__": "node_load1", "node": n}, Value: &v})
			}
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": typ, "result": series}})
}

func scaleOf(q string) float64 {
	switch {
	case strings.Contains(q, "bytes"):
		return 2e9
	case strings.Contains(q, "node_load"):
		return 40
	}
	return 1
}

// seriesFor returns label sets for a node-view style query.
func (c *fakeCluster) seriesFor(q, node string) []map[string]string {
	withNode := func(kv ...string) map[string]string {
		m := map[string]string{}
		if node != "" {
			m["node"] = node
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	switch {
	case strings.Contains(q, "by (mode)"):
		return []map[string]string{{"mode": "user"}, {"mode": "system"}, {"mode": "iowait"}}
	case strings.Contains(q, "node_load("):
		return []map[string]string{withNode("__name__", "node_load1"), withNode("__name__", "node_load5"), withNode("__name__", "node_load15")}
	case strings.Contains(q, "network"):
		return []map[string]string{withNode("device", "eth0"), withNode("device", "ib0")}
	case strings.Contains(q, "disk"):
		return []map[string]string{withNode("device", "nvme0n1")}
	case strings.Contains(q, "MemTotal_bytes{") && !strings.Contains(q, "-"):
		return []map[string]string{withNode("__name__", "node_memory_MemTotal_bytes")}
	case strings.HasPrefix(q, "up"):
		return []map[string]string{withNode("__name__", "up", "job", "vigil")}
	}
	if node == "" {
		// Explore: a few nodes' worth of series.
		var l []map[string]string
		for _, n := range c.names[:min(5, len(c.names))] {
			l = append(l, map[string]string{"__name__": "node_load1", "node": n})
		}
		return l
	}
	return []map[string]string{withNode()}
}

var fakeProcs = []struct{ pid, user, command string }{
	{"4242", "alice", "lmp_mpi -in in.lj"}, {"4243", "alice", "lmp_mpi -in in.lj"}, {"977", "bob", "python train.py --epochs 90"},
	{"1", "root", "systemd"}, {"1312", "root", "vigil sampler"}, {"8081", "carol", "gromacs mdrun -deffnm md"},
}

func (c *fakeCluster) processes(q, node string, t float64) []promSeries {
	var out []promSeries
	rate := strings.HasPrefix(q, "rate(")
	for k, p := range fakeProcs {
		lbl := func(name string) map[string]string {
			m := map[string]string{"node": node, "pid": p.pid, "user": p.user, "command": p.command}
			if !rate {
				m["__name__"] = name
			}
			return m
		}
		num := func(v float64) *[2]any { return &[2]any{t, strconv.FormatFloat(v, 'g', 6, 64)} }
		cpu := 1.0 / float64(k+1)
		if rate {
			out = append(out, promSeries{Metric: lbl(""), Value: num(cpu)})
			continue
		}
		out = append(out,
			promSeries{Metric: lbl("vigil_process_cpu_seconds_total"), Value: num(cpu * 3600)},
			promSeries{Metric: lbl("vigil_process_resident_bytes"), Value: num(float64(1+k) * 3.1e8)},
		)
	}
	return out
}
