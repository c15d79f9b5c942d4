package netclass_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/netclass"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "netclass", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "netclass", "testdata/basic", nil) }

func TestDefaultInterval(t *testing.T) {
	testutil.DefaultInterval(t, "netclass", netclass.DefaultInterval)
}

func sample(t *testing.T, p sampler.Plugin) string {
	t.Helper()
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	return string(testutil.Render(t, &b))
}

// TestLinkDownAndGone: a link going down flips node_network_up and its
// info; a removed interface's series go away; ignored ones never appear.
func TestLinkDownAndGone(t *testing.T) {
	root := t.TempDir()
	net := filepath.Join(root, "sys", "class", "net")
	write := func(dev, attr, v string) {
		if err := os.MkdirAll(filepath.Join(net, dev), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(net, dev, attr), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("eth0", "operstate", "up\n")
	write("eth0", "speed", "10000\n")
	write("veth9", "operstate", "up\n")
	write("docker0", "operstate", "down\n")
	cfg := &netclass.Config{IgnoredDevices: "^docker", MaxDevices: 2, IgnoreInvalidSpeed: true}
	p, _ := testutil.NewPlugin(t, "netclass", root, cfg)
	got := sample(t, p)
	for _, want := range []string{`node_network_up{node="test",device="eth0"} 1`, `node_network_speed_bytes{node="test",device="eth0"} 1.25e+09`, `device="veth9"`} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "docker0") {
		t.Errorf("ignored device exported:\n%s", got)
	}
	write("eth0", "operstate", "down\n")
	write("eth0", "speed", "-1\n")
	if err := os.RemoveAll(filepath.Join(net, "veth9")); err != nil {
		t.Fatal(err)
	}
	got = sample(t, p)
	if !strings.Contains(got, `node_network_up{node="test",device="eth0"} 0`) || !strings.Contains(got, `operstate="down"`) {
		t.Errorf("link down not seen:\n%s", got)
	}
	if strings.Contains(got, "speed_bytes") {
		t.Errorf("ignore_invalid_speed kept -1:\n%s", got)
	}
	if strings.Contains(got, "veth9") {
		t.Errorf("removed interface still exported:\n%s", got)
	}
}

func TestMaxDevices(t *testing.T) {
	root := t.TempDir()
	for _, dev := range []string{"a", "b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, "sys", "class", "net", dev), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := testutil.NewPlugin(t, "netclass", root, &netclass.Config{IgnoredDevices: "^$", MaxDevices: 2})
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); err == nil || !strings.Contains(err.Error(), "max_devices") {
		t.Fatalf("err = %v, want the max_devices bound", err)
	}
	if n := len(b.Samples()); n != 4 { // up and info for two devices
		t.Fatalf("%d samples, want 4", n)
	}
}

func TestParseNumber(t *testing.T) {
	for in, want := range map[string]int64{"0x1003": 4099, "1500\n": 1500, "-1": -1, "0x0": 0} {
		if got, err := netclass.ParseNumber([]byte(in)); err != nil || got != want {
			t.Errorf("ParseNumber(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "0xzz", "up", "0x11112222333344445"} {
		if _, err := netclass.ParseNumber([]byte(in)); err == nil {
			t.Errorf("ParseNumber(%q) accepted", in)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "netclass", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParseNumber(f *testing.F) {
	f.Add([]byte("0x1003"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = netclass.ParseNumber(data) })
}
