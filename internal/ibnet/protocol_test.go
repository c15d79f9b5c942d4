package ibnet

import (
	"fmt"
	"strings"
	"testing"
)

const discoverOut = `S 0000000000200001 3 8 Switch2
P 1 4 5 2 1 0 4 0000000000100003 1 1 4 cn002 HCA-1
P 3 4 5 2 1 0 4 0000000000200000 3 2 1 Switch1
P 4 1 2 2 1 0 0 0 0 0 0 
S 0000000000200000 1 8 Switch1
P 3 4 5 2 1 0 4 0000000000200001 3 2 3 Switch2
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
	if p.RemoteDesc != "cn002 HCA-1" || p.RemoteGUID != 0x100003 || p.RemoteType != TypeCA || p.RemoteLID != 4 || p.State != StateActive || p.OperVLs != 4 {
		t.Errorf("%+v", p)
	}
	if topo.Switches[0].Ports[2].RemoteGUID != 0 {
		t.Errorf("unlinked port has a remote")
	}
	for _, bad := range []string{
		"P 1 4 5 2 1 0 0 0 0 0 0 \nE 0",                                      // port before switch
		"S 00zz 3 8 x\nE 1",                                                  // bad GUID
		"S 1 3 8 x\nP 9 4 5 2 1 0 0 0 0 0 0 \nE 1",                           // port beyond the switch
		"S 1 70000 8 x\nE 1",                                                 // LID out of range
		"S 1 3 8 x\nP 1 4 5 2 1 0 0 1 1 1 99999999 a\nE 1",                   // remote LID out of range
		"S 1 3 8 x\nP 1 4 5 2 1 0 16 1 1 1 1 a\nE 1",                         // OperVLs out of range
		"S 1 3 8 x\nP 1 4 5 2 1 0 1 1 1 1 a\nE 1",                            // a protocol-1 line (no OperVLs)
		"S 1 3 1 x\nP 1 4 5 2 1 0 0 0 0 0 0 \nP 1 4 5 2 1 0 0 0 0 0 0 \nE 1", // more ports than it has
		"X discovery failed",
		"Q",
	} {
		if _, err := decode(t, bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// counterLine renders a C line as the helper does.
func counterLine(lid, port, flags int, v [NCounters]uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "C %d %d 1 %d", lid, port, flags)
	for _, x := range v {
		fmt.Fprintf(&b, " %d", x)
	}
	return b.String()
}

func TestParseCounters(t *testing.T) {
	var v [NCounters]uint64
	v[CXmitData], v[CSymbolErrors], v[CXmitWait] = 9648, 7, 12345
	v[CXmitDiscardNeighborMTU], v[CRcvLoopingErrors], v[CVLXmitWait0+3] = 11, 13, 77
	line := counterLine(1, 3, FlagsRead, v)
	var c CounterLine
	if err := ParseCounters([]byte(line), &c); err != nil {
		t.Fatal(err)
	}
	if c.LID != 1 || c.Port != 3 || !c.OK || c.Flags != FlagsRead || c.V != v {
		t.Errorf("%+v", c)
	}
	if err := ParseCounters([]byte("C 9 1 0"), &c); err != nil || c.OK {
		t.Errorf("failed port: %v %+v", err, c)
	}
	// No optional attribute read, VL skipped: their values read 0.
	var base [NCounters]uint64
	base[CXmitData] = 5
	if err := ParseCounters([]byte(counterLine(1, 3, FlagVLXmitWaitSkipped, base)), &c); err != nil || c.Flags != FlagVLXmitWaitSkipped {
		t.Errorf("skipped VL: %v %+v", err, c)
	}
	wide := base
	wide[CXmitDiscardInactive] = 1 << 16 // a 16-bit counter
	wide32 := base
	wide32[CXmitWait] = 1 << 32
	for _, bad := range []string{
		"C 1 3 1 1 2",
		line + " 5",
		"C 1 3 2",
		"C 1 3 0 5",
		"C x 3 1",
		"C 1 300 0",
		counterLine(1, 3, 64, base), // unknown flag
		counterLine(1, 3, FlagXmitDiscardDetails, v),    // values of attributes not read
		counterLine(1, 3, FlagXmitDiscardDetails, wide), // 16-bit counter overflows
		counterLine(1, 3, 0, wide32),                    // 32-bit counter overflows
		"C 1 3 1 0 " + strings.Repeat("1 ", 20) + "1",   // a protocol-1 line
		"C 1 3 1 0 " + strings.Repeat("1 ", NCounters-1) + "99999999999999999999",
	} {
		if err := ParseCounters([]byte(bad), &c); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	lb := []byte(line)
	if allocs := testing.AllocsPerRun(100, func() { ParseCounters(lb, &c) }); allocs != 0 {
		t.Errorf("%v allocs", allocs)
	}
	if n, ns, mads, err := ParseEnd([]byte("E 3 118478 17")); err != nil || n != 3 || ns != 118478 || mads != 17 {
		t.Errorf("ParseEnd: %d %d %d %v", n, ns, mads, err)
	}
	if _, _, _, err := ParseEnd([]byte("E 3 118478")); err == nil {
		t.Error("ParseEnd accepted a protocol-1 line")
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
	f.Add([]byte("S 1 2 3\nP 1 1 1 1 1 1 5 1 1 1 1 d\nE 1"))
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
				if p.Num < 1 || p.Num > s.NPorts || p.OperVLs > 15 {
					t.Fatalf("port %d of %d, OperVLs %d", p.Num, s.NPorts, p.OperVLs)
				}
			}
		}
	})
}

func FuzzParseCounters(f *testing.F) {
	var v [NCounters]uint64
	v[CXmitData], v[CXmitWait], v[CRcvLoopingErrors], v[CVLXmitWait0+15] = 9648, 12345, 2, 65535
	f.Add([]byte(counterLine(1, 3, FlagsRead, v)))
	f.Add([]byte(counterLine(1, 3, FlagsSkipped, [NCounters]uint64{})))
	f.Add([]byte("C 9 1 0"))
	f.Add([]byte("E 3 118478 12"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c CounterLine
		if err := ParseCounters(data, &c); err == nil && c.OK {
			if c.Port > MaxPorts || c.Flags > flagsMax {
				t.Fatalf("port %d flags %d", c.Port, c.Flags)
			}
			for k, x := range c.V {
				if counterBits(k) < 64 && x >= 1<<counterBits(k) {
					t.Fatalf("counter %d = %d, wider than %d bits", k, x, counterBits(k))
				}
				if g := CounterGroup(k); g != 0 && c.Flags&g == 0 && x != 0 {
					t.Fatalf("counter %d = %d for an attribute not read", k, x)
				}
			}
		}
		ParseEnd(data)
	})
}
