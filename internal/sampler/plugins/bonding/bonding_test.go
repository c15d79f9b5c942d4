package bonding_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: bond0 with one member down, bond1 with the older slave_ member
// directories. No bond on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "bonding", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "bonding", "testdata/basic", nil) }

func TestModuleLoadsLater(t *testing.T) {
	testutil.FileAppearsLater(t, "bonding", map[string]string{
		"sys/class/net/bonding_masters":                           "bond0\n",
		"sys/class/net/bond0/bonding/slaves":                      "eth0\n",
		"sys/class/net/bond0/lower_eth0/bonding_slave/mii_status": "up\n",
	}, "node_bonding_active")
}

// A member added to a bond is picked up; a removed bond loses its series.
func TestChanges(t *testing.T) {
	root := t.TempDir()
	w := func(rel, s string) {
		p := filepath.Join(root, "sys/class/net", rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w("bonding_masters", "bond0 bond1\n")
	w("bond0/bonding/slaves", "eth0\n")
	w("bond0/lower_eth0/bonding_slave/mii_status", "up\n")
	w("bond0/lower_eth1/bonding_slave/mii_status", "up\n")
	w("bond1/bonding/slaves", "\n")
	p, _ := testutil.NewPlugin(t, "bonding", root, nil)
	get := func() map[string]float64 {
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, s := range b.Samples() {
			m[s.Desc.Name+"/"+s.Desc.Labels[0].Value] = s.Value
		}
		return m
	}
	if m := get(); m["node_bonding_slaves/bond0"] != 1 || m["node_bonding_active/bond0"] != 1 || m["node_bonding_slaves/bond1"] != 0 {
		t.Fatalf("first tick: %v", m)
	}
	w("bond0/bonding/slaves", "eth0 eth1\n")
	w("bonding_masters", "bond0\n")
	m := get()
	if m["node_bonding_slaves/bond0"] != 2 || m["node_bonding_active/bond0"] != 2 {
		t.Errorf("after adding eth1: %v", m)
	}
	if _, ok := m["node_bonding_slaves/bond1"]; ok {
		t.Errorf("bond1 still reported after removal: %v", m)
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "bonding", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
