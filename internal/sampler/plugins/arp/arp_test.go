package arp_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: three devices, one VLAN, an incomplete entry (counted, as
// upstream counts every line).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "arp", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "arp", "testdata/basic", nil) }

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
