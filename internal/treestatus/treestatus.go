// Package treestatus rebuilds the aggregation tree from the health streams
// aggregators send upstream (vigil_aggregator_* series), for
// `vigil tree status` and the dashboard's tree view.
package treestatus

import (
	"context"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Sample is one series of an instant query result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// QueryFunc evaluates a PromQL instant query now.
type QueryFunc func(ctx context.Context, expr string) ([]Sample, error)

// Aggregator is one aggregator as the server last heard of it.
type Aggregator struct {
	Name              string        `json:"name"`
	Listen            string        `json:"listen"`
	Upstream          []string      `json:"upstream"`
	Parent            string        `json:"parent"`
	Up                bool          `json:"up"`
	UpstreamConnected bool          `json:"upstream_connected"`
	ChildrenUp        float64       `json:"children_up"`
	ChildrenDown      float64       `json:"children_down"`
	LagSeconds        float64       `json:"lag_seconds"`
	ValuesReceived    float64       `json:"values_received"`
	ValuesDropped     float64       `json:"values_dropped"`
	Children          []*Aggregator `json:"children,omitempty"`
}

// Tree is the whole picture.
type Tree struct {
	Name        string        `json:"name"`
	Up          bool          `json:"up"`
	NodesUp     int           `json:"nodes_up"`
	NodesDown   int           `json:"nodes_down"`
	Aggregators int           `json:"aggregators"`
	Children    []*Aggregator `json:"children"`
	// ClockSkew lists the nodes (and aggregators) whose clocks are off by
	// more than the server's max_future: their ticks are refused or land
	// at the wrong time. At most MaxClockSkewListed, largest offset first;
	// NodesClockSkew counts them all.
	NodesClockSkew int         `json:"nodes_clock_skew"`
	ClockSkew      []NodeClock `json:"clock_skew,omitempty"`
	// Down names the nodes that are down (up == 0), those expected but
	// never connected included, in name order: at most MaxDownListed of
	// the NodesDown.
	Down []string `json:"down,omitempty"`
	// DownRanges is Down written as host ranges (HostRanges), for people.
	DownRanges []string `json:"down_ranges,omitempty"`
}

// MaxDownListed bounds Tree.Down.
const MaxDownListed = 10000

// NodeClock is a node in the clock-skew state.
type NodeClock struct {
	Node string `json:"node"`
	// OffsetSeconds is how far the node's clock is ahead of the server's
	// (negative: behind).
	OffsetSeconds float64 `json:"offset_seconds"`
}

// MaxClockSkewListed bounds Tree.ClockSkew.
const MaxClockSkewListed = 100

// clockSkewQuery selects the offsets of the nodes the server flags
// (package ingest stores both series every interval).
const clockSkewQuery = "vigil_node_clock_offset_seconds and on(node) (vigil_node_clock_skew == 1)"

// Build queries the aggregators' health and links each to its parent: the
// aggregator whose listen address matches one of its upstream addresses,
// else the server (the root).
func Build(ctx context.Context, q QueryFunc) (*Tree, error) {
	info, err := q(ctx, "vigil_aggregator_info")
	if err != nil {
		return nil, err
	}
	byName := map[string]*Aggregator{}
	var all []*Aggregator
	for _, s := range info {
		name := s.Labels["aggregator"]
		if name == "" || byName[name] != nil {
			continue
		}
		a := &Aggregator{Name: name, Listen: s.Labels["listen"], Upstream: splitList(s.Labels["upstream"])}
		byName[name] = a
		all = append(all, a)
	}
	fields := []struct {
		expr string
		set  func(a *Aggregator, v float64)
	}{
		{"vigil_aggregator_children_up", func(a *Aggregator, v float64) { a.ChildrenUp = v }},
		{"vigil_aggregator_children_down", func(a *Aggregator, v float64) { a.ChildrenDown = v }},
		{"vigil_aggregator_lag_seconds", func(a *Aggregator, v float64) { a.LagSeconds = v }},
		{"vigil_aggregator_values_received_total", func(a *Aggregator, v float64) { a.ValuesReceived = v }},
		{"vigil_aggregator_values_dropped_total", func(a *Aggregator, v float64) { a.ValuesDropped = v }},
		{"vigil_aggregator_upstream_connected", func(a *Aggregator, v float64) { a.UpstreamConnected = v == 1 }},
		{"up", func(a *Aggregator, v float64) { a.Up = v == 1 }},
	}
	for _, f := range fields {
		res, err := q(ctx, f.expr)
		if err != nil {
			return nil, err
		}
		for _, s := range res {
			a := byName[s.Labels["aggregator"]]
			if a == nil {
				a = byName[s.Labels["node"]] // `up` of the aggregator's own stream
			}
			if a != nil {
				f.set(a, s.Value)
			}
		}
	}
	t := &Tree{Name: "server", Up: true, Aggregators: len(all)}
	ups, err := q(ctx, "up")
	if err != nil {
		return nil, err
	}
	for _, s := range ups {
		if byName[s.Labels["node"]] != nil {
			continue // aggregators are not nodes
		}
		if s.Value == 1 {
			t.NodesUp++
		} else {
			t.NodesDown++
			if n := s.Labels["node"]; n != "" {
				t.Down = append(t.Down, n)
			}
		}
	}
	sort.Strings(t.Down)
	if len(t.Down) > MaxDownListed {
		t.Down = t.Down[:MaxDownListed]
	}
	t.DownRanges = HostRanges(t.Down)
	skew, err := q(ctx, clockSkewQuery)
	if err != nil {
		return nil, err
	}
	for _, s := range skew {
		if n := s.Labels["node"]; n != "" {
			t.ClockSkew = append(t.ClockSkew, NodeClock{Node: n, OffsetSeconds: s.Value})
		}
	}
	t.NodesClockSkew = len(t.ClockSkew)
	sort.Slice(t.ClockSkew, func(i, j int) bool {
		a, b := math.Abs(t.ClockSkew[i].OffsetSeconds), math.Abs(t.ClockSkew[j].OffsetSeconds)
		return a > b || a == b && t.ClockSkew[i].Node < t.ClockSkew[j].Node
	})
	if len(t.ClockSkew) > MaxClockSkewListed {
		t.ClockSkew = t.ClockSkew[:MaxClockSkewListed]
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	for _, a := range all {
		a.Parent = "server"
		for _, u := range a.Upstream {
			if p := findByListen(all, u); p != nil && p != a {
				a.Parent = p.Name
				break
			}
		}
	}
	for _, a := range all {
		if p := byName[a.Parent]; p != nil && !isAncestor(a, p, byName) {
			p.Children = append(p.Children, a)
		} else {
			a.Parent = "server"
			t.Children = append(t.Children, a)
		}
	}
	return t, nil
}

// isAncestor guards against a misconfigured loop (a feeds b feeds a).
func isAncestor(a, p *Aggregator, byName map[string]*Aggregator) bool {
	for seen := 0; p != nil && seen <= len(byName); seen++ {
		if p == a {
			return true
		}
		p = byName[p.Parent]
	}
	return false
}

// findByListen matches an upstream address with an aggregator's listen
// address; a wildcard or loopback listen host matches by port.
func findByListen(aggs []*Aggregator, addr string) *Aggregator {
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// HostRanges writes sorted node names compactly, the way host lists are
// written (cn[004-005,009] gpu1): names that differ only in a trailing
// number of the same width share one bracket, consecutive numbers
// become a range.
func HostRanges(names []string) []string {
	type num struct {
		prefix string
		width  int
	}
	groups := map[num][]int{}
	var order []num
	var out []string
	for _, n := range names {
		i := len(n)
		for i > 0 && n[i-1] >= '0' && n[i-1] <= '9' {
			i--
		}
		v, err := strconv.Atoi(n[i:])
		if i == len(n) || len(n)-i > 9 || err != nil {
			out = append(out, n) // no trailing number: as it is
			continue
		}
		k := num{n[:i], len(n) - i}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], v)
	}
	for _, k := range order {
		vs := groups[k]
		sort.Ints(vs)
		if len(vs) == 1 {
			out = append(out, k.prefix+pad(vs[0], k.width))
			continue
		}
		var b strings.Builder
		b.WriteString(k.prefix + "[")
		for i := 0; i < len(vs); {
			j := i
			for j+1 < len(vs) && vs[j+1] <= vs[j]+1 {
				j++
			}
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(pad(vs[i], k.width))
			if vs[j] != vs[i] {
				b.WriteString("-" + pad(vs[j], k.width))
			}
			i = j + 1
		}
		b.WriteByte(']')
		out = append(out, b.String())
	}
	sort.Strings(out)
	return out
}

func pad(v, width int) string {
	s := strconv.Itoa(v)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	return s
}
