package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(Command{Name: "tree", Summary: "show the aggregation tree as it is now (tree status)", Run: runTree})
}

// DefaultServerURL is where client commands find `vigil server`.
const DefaultServerURL = "http://127.0.0.1:9090"

func runTree(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		return &ExitError{Code: 2, Err: errors.New("usage: vigil tree status [--server URL]")}
	}
	fs := flag.NewFlagSet("tree status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", DefaultServerURL, "vigil server URL")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	aggs, err := fetchTree(ctx, *server)
	if err != nil {
		return err
	}
	up, down, err := nodeCounts(ctx, *server)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"server": *server, "nodes_up": up, "nodes_down": down, "aggregators": aggs})
	}
	printTree(stdout, *server, up, down, aggs)
	return nil
}

// aggStatus is one aggregator as the server last heard of it.
type aggStatus struct {
	Name              string   `json:"name"`
	Listen            string   `json:"listen"`
	Upstream          []string `json:"upstream"`
	Parent            string   `json:"parent"`
	Up                bool     `json:"up"`
	UpstreamConnected bool     `json:"upstream_connected"`
	ChildrenUp        float64  `json:"children_up"`
	ChildrenDown      float64  `json:"children_down"`
	LagSeconds        float64  `json:"lag_seconds"`
	ValuesReceived    float64  `json:"values_received"`
	ValuesDropped     float64  `json:"values_dropped"`
	children          []*aggStatus
}

type promVector struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

func instantQuery(ctx context.Context, server, expr string) (*promVector, error) {
	u := strings.TrimSuffix(server, "/") + "/api/v1/query?query=" + url.QueryEscape(expr)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", server, err)
	}
	defer resp.Body.Close()
	var v promVector
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v); err != nil {
		return nil, fmt.Errorf("query %s: bad response (HTTP %d): %w", server, resp.StatusCode, err)
	}
	if v.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, v.Error)
	}
	return &v, nil
}

func vecValue(v [2]any) float64 {
	s, _ := v[1].(string)
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

func fetchTree(ctx context.Context, server string) ([]*aggStatus, error) {
	info, err := instantQuery(ctx, server, "vigil_aggregator_info")
	if err != nil {
		return nil, err
	}
	byName := map[string]*aggStatus{}
	var aggs []*aggStatus
	for _, r := range info.Data.Result {
		a := &aggStatus{Name: r.Metric["aggregator"], Listen: r.Metric["listen"], Upstream: splitList(r.Metric["upstream"])}
		if byName[a.Name] == nil {
			byName[a.Name] = a
			aggs = append(aggs, a)
		}
	}
	fill := func(expr string, set func(a *aggStatus, v float64)) error {
		v, err := instantQuery(ctx, server, expr)
		if err != nil {
			return err
		}
		for _, r := range v.Data.Result {
			if a := byName[r.Metric["aggregator"]]; a != nil {
				set(a, vecValue(r.Value))
			} else if a := byName[r.Metric["node"]]; a != nil {
				set(a, vecValue(r.Value))
			}
		}
		return nil
	}
	steps := []struct {
		expr string
		set  func(a *aggStatus, v float64)
	}{
		{"vigil_aggregator_children_up", func(a *aggStatus, v float64) { a.ChildrenUp = v }},
		{"vigil_aggregator_children_down", func(a *aggStatus, v float64) { a.ChildrenDown = v }},
		{"vigil_aggregator_lag_seconds", func(a *aggStatus, v float64) { a.LagSeconds = v }},
		{"vigil_aggregator_values_received_total", func(a *aggStatus, v float64) { a.ValuesReceived = v }},
		{"vigil_aggregator_values_dropped_total", func(a *aggStatus, v float64) { a.ValuesDropped = v }},
		{"vigil_aggregator_upstream_connected", func(a *aggStatus, v float64) { a.UpstreamConnected = v == 1 }},
		{"up", func(a *aggStatus, v float64) { a.Up = v == 1 }},
	}
	for _, s := range steps {
		if err := fill(s.expr, s.set); err != nil {
			return nil, err
		}
	}
	for _, a := range aggs {
		a.Parent = "server"
		for _, u := range a.Upstream {
			if p := findByListen(aggs, u); p != nil && p != a {
				a.Parent = p.Name
				break
			}
		}
	}
	sort.Slice(aggs, func(i, j int) bool { return aggs[i].Name < aggs[j].Name })
	return aggs, nil
}

// findByListen matches an upstream address with an aggregator's listen
// address; a wildcard listen host matches any host with the same port.
func findByListen(aggs []*aggStatus, addr string) *aggStatus {
	uh, up, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	for _, a := range aggs {
		lh, lp, err := net.SplitHostPort(a.Listen)
		if err != nil || lp != up {
			continue
		}
		if lh == uh || lh == "" || lh == "0.0.0.0" || lh == "::" || (isLoop(lh) && isLoop(uh)) {
			return a
		}
	}
	return nil
}

func isLoop(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

func nodeCounts(ctx context.Context, server string) (up, down int, err error) {
	v, err := instantQuery(ctx, server, "up")
	if err != nil {
		return 0, 0, err
	}
	for _, r := range v.Data.Result {
		if vecValue(r.Value) == 1 {
			up++
		} else {
			down++
		}
	}
	return up, down, nil
}

func printTree(w io.Writer, server string, up, down int, aggs []*aggStatus) {
	fmt.Fprintf(w, "server %s: %d nodes up, %d down, %d aggregators\n", server, up, down, len(aggs))
	byName := map[string]*aggStatus{}
	for _, a := range aggs {
		byName[a.Name] = a
	}
	var roots []*aggStatus
	for _, a := range aggs {
		if p := byName[a.Parent]; p != nil {
			p.children = append(p.children, a)
		} else {
			roots = append(roots, a)
		}
	}
	var walk func(list []*aggStatus, indent string)
	walk = func(list []*aggStatus, indent string) {
		for i, a := range list {
			branch, next := "├── ", "│   "
			if i == len(list)-1 {
				branch, next = "└── ", "    "
			}
			state := "up"
			if !a.Up {
				state = "DOWN"
			}
			upstream := "upstream ok"
			if !a.UpstreamConnected {
				upstream = "UPSTREAM LOST"
			}
			fmt.Fprintf(w, "%s%s%s [%s] listen %s, %s, children %.0f up / %.0f down, lag %.3fs, received %.0f, dropped %.0f\n",
				indent, branch, a.Name, state, a.Listen, upstream, a.ChildrenUp, a.ChildrenDown, a.LagSeconds, a.ValuesReceived, a.ValuesDropped)
			walk(a.children, indent+next)
		}
	}
	walk(roots, "")
}
