package treestatus

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/internal/treestate"
)

func fake(data map[string][]Sample) QueryFunc {
	return func(_ context.Context, expr string) ([]Sample, error) {
		if expr == "broken" {
			return nil, fmt.Errorf("bad")
		}
		return data[expr], nil
	}
}

func lbl(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestBuild(t *testing.T) {
	q := fake(map[string][]Sample{
		"vigil_aggregator_info": {
			{Labels: lbl("aggregator", "l1a", "listen", "127.0.0.1:7001", "upstream", "127.0.0.1:7100")},
			{Labels: lbl("aggregator", "l1b", "listen", "127.0.0.1:7002", "upstream", "127.0.0.1:7100,127.0.0.1:7200")},
			{Labels: lbl("aggregator", "l2", "listen", ":7100", "upstream", "127.0.0.1:9000")},
		},
		"vigil_aggregator_children_up": {{Labels: lbl("aggregator", "l1a"), Value: 10}, {Labels: lbl("aggregator", "l2"), Value: 2}},
		"up": {
			{Labels: lbl("node", "cn1"), Value: 1}, {Labels: lbl("node", "cn2"), Value: 0},
			{Labels: lbl("node", "l1a"), Value: 1}, {Labels: lbl("node", "l2"), Value: 1},
		},
		clockSkewQuery: {{Labels: lbl("node", "slow"), Value: -3600}, {Labels: lbl("node", "fast"), Value: 7200}},
	})
	tr, err := Build(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if tr.NodesUp != 1 || tr.NodesDown != 1 || tr.Aggregators != 3 {
		t.Errorf("counts %+v", tr)
	}
	if len(tr.Down) != 1 || tr.Down[0] != "cn2" || len(tr.DownRanges) != 1 || tr.DownRanges[0] != "cn2" {
		t.Errorf("down %v %v, want [cn2]", tr.Down, tr.DownRanges)
	}
	if tr.NodesClockSkew != 2 || len(tr.ClockSkew) != 2 || tr.ClockSkew[0] != (NodeClock{"fast", 7200}) || tr.ClockSkew[1] != (NodeClock{"slow", -3600}) {
		t.Errorf("clock skew %d %+v, want fast +2h then slow -1h", tr.NodesClockSkew, tr.ClockSkew)
	}
	if len(tr.Children) != 1 || tr.Children[0].Name != "l2" {
		t.Fatalf("root children %+v, want [l2]", tr.Children)
	}
	l2 := tr.Children[0]
	if len(l2.Children) != 2 || l2.Children[0].Name != "l1a" || l2.Children[1].Name != "l1b" {
		t.Fatalf("l2 children %+v", l2.Children)
	}
	if l2.Children[0].ChildrenUp != 10 || !l2.Children[0].Up || l2.Children[1].Up {
		t.Errorf("l1a/l1b state %+v %+v", l2.Children[0], l2.Children[1])
	}
}

func TestBuildLoop(t *testing.T) {
	q := fake(map[string][]Sample{
		"vigil_aggregator_info": {
			{Labels: lbl("aggregator", "a", "listen", "127.0.0.1:1", "upstream", "127.0.0.1:2")},
			{Labels: lbl("aggregator", "b", "listen", "127.0.0.1:2", "upstream", "127.0.0.1:1")},
		},
	})
	tr, err := Build(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Children) == 0 {
		t.Fatal("a loop must still hang off the root, not vanish")
	}
}

func TestHostRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{"login"}, []string{"login"}},
		{[]string{"cn005", "cn004", "cn009", "cn010", "cn011", "gpu1", "login"},
			[]string{"cn[004-005,009-011]", "gpu1", "login"}},
		{[]string{"cn9", "cn10", "cn11", "cn10"}, []string{"cn9", "cn[10-11]"}},
		{[]string{"r1n1", "r1n2", "r2n1"}, []string{"r1n[1-2]", "r2n1"}},
		{[]string{"x99999999999999999999"}, []string{"x99999999999999999999"}},
	} {
		got := HostRanges(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("HostRanges(%v) = %v, want %v", tc.in, got, tc.want)
			continue
		}
		// Written back as a host list, the ranges name the same nodes.
		var back []string
		for _, r := range got {
			names, err := treestate.ExpandHostList(r)
			if err != nil {
				t.Fatalf("%q: %v", r, err)
			}
			back = append(back, names...)
		}
		want := slices.Compact(slices.Sorted(slices.Values(tc.in)))
		slices.Sort(back)
		if !slices.Equal(back, want) {
			t.Errorf("%v expands to %v, want %v", got, back, want)
		}
	}
}
