package arp_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/arp"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: three devices, one VLAN, an incomplete entry (counted, as
// upstream counts every line).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "arp", nil) }

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "arp", "testdata/basic", nil)
	testutil.ZeroAllocs(t, "arp", "testdata/basic", &arp.Config{DeviceExclude: "^eth"})
}

// device_include and device_exclude as node_exporter's flags: a device is
// kept when it matches the one and not the other.
func TestDeviceFilter(t *testing.T) {
	for _, tc := range []struct {
		include, exclude, want string
	}{
		{"", "", "eth0=1 eth1.100=1 ib0=3"},
		{"^ib", "", "ib0=3"},
		{"", `\.`, "eth0=1 ib0=3"},
		{"^eth", "100$", "eth0=1"},
		{"^lo$", "", ""},
	} {
		p, _ := testutil.NewPlugin(t, "arp", "testdata/basic", &arp.Config{DeviceInclude: tc.include, DeviceExclude: tc.exclude})
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, d := range b.Descs {
			got = append(got, fmt.Sprintf("%s=%v", d.Labels[0].Value, b.Values[i]))
		}
		sort.Strings(got)
		if strings.Join(got, " ") != tc.want {
			t.Errorf("include %q exclude %q: %v, want %s", tc.include, tc.exclude, got, tc.want)
		}
	}
}

func TestConfigFile(t *testing.T) {
	f, err := config.Parse("vigil.toml", []byte("[plugins.arp]\ndevice_exclude = '^(docker|veth)'\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Plugins["arp"].(*arp.Config); c.DeviceExclude != "^(docker|veth)" || c.DeviceInclude != "" {
		t.Errorf("decoded %+v", c)
	}
	_, err = config.Parse("vigil.toml", []byte("[plugins.arp]\ndevice_include = '(ib'\n"))
	if err == nil || !strings.Contains(err.Error(), "plugins.arp: device_include") {
		t.Errorf("bad regexp: err = %v", err)
	}
}

// A device whose entries all expire loses its series; a short line is an error.
func TestChanges(t *testing.T) {
	hdr := "IP address       HW type     Flags       HW address            Mask     Device\n"
	f := testutil.NewFileFixture(t, "arp", "proc/net/arp", hdr+"10.0.0.1 0x1 0x2 aa:bb:cc:dd:ee:ff * eth0\n10.0.0.2 0x1 0x2 aa:bb:cc:dd:ee:fe * eth1\n", nil)
	var b metric.Batch
	if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil || b.Len() != 2 {
		t.Fatalf("err %v, %d series", err, b.Len())
	}
	f.Write(hdr + "10.0.0.1 0x1 0x2 aa:bb:cc:dd:ee:ff * eth0\n")
	b.Reset(time.Now())
	if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil || b.Len() != 1 || b.Samples()[0].Desc.Labels[0].Value != "eth0" {
		t.Fatalf("after expiry: err %v, %v", err, b.Samples())
	}
	f.Write(hdr + "10.0.0.1 0x1 0x2\n")
	if err := f.P.Sample(context.Background(), time.Now(), &b); err == nil {
		t.Fatal("short line accepted")
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "arp", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
