package simulate

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// TestFabricSweeps checks the simulated fabric against the ibnet series
// contract: every port swept by exactly one node, every series with the
// contract's labels, each switch link seen from both ends, counters that
// never go back.
func TestFabricSweeps(t *testing.T) {
	f, err := NewFabric(FabricOptions{Nodes: 40, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if f.Switches() != 5 {
		t.Fatalf("%d switches for 40 nodes, want 3 leaves + 2 spines", f.Switches())
	}
	type port struct{ guid, port string }
	seen := map[port]string{} // port → its link's far end
	infos := map[string]string{}
	last := map[string]float64{}
	sweepers := 0
	var b metric.Batch
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 40 {
		sw := f.Sweeper(i)
		if sw == nil {
			continue
		}
		sweepers++
		for k := range 700 { // more than ten minutes: every flapping link goes down once
			b.Reset(t0.Add(time.Duration(k) * time.Second))
			sw.Sample(b.Time, time.Second, &b)
			if b.Len() != sw.Series() {
				t.Fatalf("node %d: %d series, Series() says %d", i, b.Len(), sw.Series())
			}
			for j, d := range b.Descs {
				l := map[string]string{}
				for _, x := range d.Labels {
					l[x.Name] = x.Value
				}
				if d.Name == "vigil_ib_switch_info" {
					infos[l["switch_guid"]] = l["level"]
					continue
				}
				for _, need := range []string{"switch_guid", "switch", "port", "remote_guid", "remote", "remote_port", "remote_type", "remote_lid", "lid"} {
					if l[need] == "" {
						t.Fatalf("%s%v: no %s label", d.Name, d.Labels, need)
					}
				}
				key := fmt.Sprint(d.Name, d.Labels)
				if d.Type == metric.Counter && b.Values[j] < last[key] {
					t.Fatalf("%s went back from %g to %g", key, last[key], b.Values[j])
				}
				last[key] = b.Values[j]
				if d.Name == "vigil_ib_port_info" && k == 0 {
					p := port{l["switch_guid"], l["port"]}
					if _, dup := seen[p]; dup {
						t.Fatalf("port %v swept twice", p)
					}
					seen[p] = l["remote_guid"] + "/" + l["remote_port"] + "/" + l["remote_type"]
				}
			}
		}
	}
	if sweepers != 3 {
		t.Fatalf("%d sweeping nodes, want one per leaf", sweepers)
	}
	// 40 CA ports and 3 × 2 switch links from both ends.
	if len(seen) != 52 {
		t.Fatalf("%d ports, want 52", len(seen))
	}
	for p, far := range seen {
		var g, fp, typ string
		fmt.Sscanf(replaceSlash(far), "%s %s %s", &g, &fp, &typ)
		if typ == "switch" {
			if back, ok := seen[port{g, fp}]; !ok || back != p.guid+"/"+p.port+"/switch" {
				t.Errorf("%v → %s: the far end says %q", p, far, back)
			}
		}
	}
	levels := map[string]int{}
	for _, lv := range infos {
		levels[lv]++
	}
	if levels["leaf"] != 3 || levels["spine"] != 2 {
		t.Fatalf("switch levels %v, want 3 leaves and 2 spines", levels)
	}
	if _, err := NewFabric(FabricOptions{Nodes: 0}); err == nil {
		t.Fatal("no error for 0 nodes")
	}
}

func replaceSlash(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '/' {
			b[i] = ' '
		}
	}
	return string(b)
}

// TestFabricFlap finds a simulated link that flaps: it is down one minute
// in ten, and link_downed counts each time it goes down.
func TestFabricFlap(t *testing.T) {
	for seed := uint64(1); seed < 100; seed++ {
		f, err := NewFabric(FabricOptions{Nodes: 40, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			sw := f.Sweeper(i)
			if sw == nil {
				continue
			}
			for k := range sw.ports {
				if !sw.ports[k].flaps {
					continue
				}
				var b metric.Batch
				down, downed := 0, 0.0
				t0 := time.Unix(1_800_000_000, 0)
				for s := range 1200 {
					b.Reset(t0.Add(time.Duration(s) * time.Second))
					sw.Sample(b.Time, time.Second, &b)
					for j, d := range b.Descs {
						if d != sw.ports[k].d[fsUp] && d != sw.ports[k].d[fsLinkDowned] {
							continue
						}
						if d.Name == "vigil_ib_port_up" && b.Values[j] == 0 {
							down++
						}
						if d.Name == "vigil_ib_port_link_downed_total" {
							downed = b.Values[j]
						}
					}
				}
				// Two cycles: two downs, three when the run starts and
				// ends inside one.
				if down != 120 || downed < 2 || downed > 3 {
					t.Fatalf("seed %d: flapping port down %d s of 1200 (want 120), link_downed %g (want 2 or 3)", seed, down, downed)
				}
				return
			}
		}
	}
	t.Fatal("no flapping link in 99 seeds")
}
