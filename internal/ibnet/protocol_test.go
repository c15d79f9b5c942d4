package ibnet

import (
	"strings"
	"testing"
)

const discoverOut = `S 0000000000200001 3 8 Switch2
P 1 4 5 2 1 0 0000000000100003 1 1 4 cn002 HCA-1
P 3 4 5 2 1 0 0000000000200000 3 2 1 Switch1
P 4 1 2 2 1 0 0 0 0 0 
S 0000000000200000 1 8 Switch1
P 3 4 5 2 1 0 0000000000200001 3 2 3 Switch2
E 2`

func decode(t *testing.T, s string) (Topology, error) {
	t.Helper()
	var d TopologyDecoder
	for _, line := range strings.Split(s, "\n") {
		done, err := d.Line([]byte(line))
		if err != nil {
			return Topology{}, err
		}
		if done {
			return d.Topology(), nil
		}
	}
	t.Fatal("no E line")
	return Topology{}, nil
}

func TestTopologyDecoder(t *testing.T) {
	topo, err := decode(t, discoverOut)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Switches) != 2 || len(topo.Switches[0].Ports) != 3 {
		t.Fatalf("%+v", topo)
	}
	p := topo.Switches[0].Ports[0]
	if p.RemoteDesc != "cn002 HCA-1" || p.RemoteGUID != 0x100003 || p.RemoteType != TypeCA || p.RemoteLID != 4 || p.State != StateActive {
		t.Errorf("%+v", p)
	}
	if topo.Switches[0].Ports[2].RemoteGUID != 0 {
		t.Errorf("unlinked port has a remote")
	}
	for _, bad := range []string{
		"P 1 4 5 2 1 0 0 0 0 0 \nE 0",                                    // port before switch
		"S 00zz 3 8 x\nE 1",                                              // bad GUID
		"S 1 3 8 x\nP 9 4 5 2 1 0 0 0 0 0 \nE 1",                         // port beyond the switch
		"S 1 70000 8 x\nE 1",                                             // LID out of range
		"S 1 3 8 x\nP 1 4 5 2 1 0 1 1 1 99999999 a\nE 1",                 // remote LID out of range
		"S 1 3 1 x\nP 1 4 5 2 1 0 0 0 0 0 \nP 1 4 5 2 1 0 0 0 0 0 \nE 1", // more ports than it has
		"X discovery failed",
		"Q",
	} {
		if _, err := decode(t, bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestParseCounters(t *testing.T) {
	var c CounterLine
	line := "C 1 3 1 9648 9648 134 134 0 0 0 0 7 0 0 0 0 0 0 0 0 0 0 0 12345"
	if err := ParseCounters([]byte(line), &c); err != nil {
		t.Fatal(err)
	}
	if c.LID != 1 || c.Port != 3 || !c.OK || c.V[CXmitData] != 9648 || c.V[CSymbolErrors] != 7 || c.V[CXmitWait] != 12345 {
		t.Errorf("%+v", c)
	}
	if err := ParseCounters([]byte("C 9 1 0"), &c); err != nil || c.OK {
		t.Errorf("failed port: %v %+v", err, c)
	}
	for _, bad := range []string{"C 1 3 1 1 2", line + " 5", "C 1 3 2", "C 1 3 0 5", "C x 3 1", "C 1 300 0", "C 1 3 1 " + strings.Repeat("1 ", 20) + "99999999999999999999"} {
		if err := ParseCounters([]byte(bad), &c); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	lb := []byte(line)
	if allocs := testing.AllocsPerRun(100, func() { ParseCounters(lb, &c) }); allocs != 0 {
		t.Errorf("%v allocs", allocs)
	}
}

func TestSplitDeterministic(t *testing.T) {
	topo, err := decode(t, discoverOut)
	if err != nil {
		t.Fatal(err)
	}
	a := Split(topo, []string{"cn002", "other"})
	b := Split(topo, []string{"other", "cn002", "cn002"})
	if len(a) != 2 || a[0x200001] != "cn002" || a[0x200000] != "other" {
		t.Errorf("split %v", a)
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("split depends on the list order: %v vs %v", a, b)
		}
	}
	lv := Levels(topo)
	if lv[0x200001] != LevelLeaf || lv[0x200000] != LevelSpine {
		t.Errorf("levels %v", lv)
	}
}

func FuzzTopologyDecoder(f *testing.F) {
	f.Add([]byte(discoverOut))
	f.Add([]byte("S 1 2 3\nP 1 1 1 1 1 1 1 1 1 1 d\nE 1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d TopologyDecoder
		for _, line := range strings.Split(string(data), "\n") {
			done, err := d.Line([]byte(line))
			if err != nil || done {
				break
			}
		}
		for _, s := range d.Topology().Switches {
			for _, p := range s.Ports {
				if p.Num < 1 || p.Num > s.NPorts {
					t.Fatalf("port %d of %d", p.Num, s.NPorts)
				}
			}
		}
	})
}

func FuzzParseCounters(f *testing.F) {
	f.Add([]byte("C 1 3 1 9648 9648 134 134 0 0 0 0 7 0 0 0 0 0 0 0 0 0 0 0 12345"))
	f.Add([]byte("C 9 1 0"))
	f.Add([]byte("E 3 118478"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c CounterLine
		if err := ParseCounters(data, &c); err == nil && c.Port > MaxPorts {
			t.Fatalf("port %d", c.Port)
		}
		ParseEnd(data)
	})
}
