package sockstat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/sockstat"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "sockstat", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "sockstat", "testdata/basic", nil) }

// TestNoIPv6: without sockstat6 the IPv4 file still reports, without error.
func TestNoIPv6(t *testing.T) {
	f := testutil.NewFileFixture(t, "sockstat", "proc/net/sockstat", "sockets: used 7\nTCP: inuse 3 orphan 0 tw 1 alloc 4 mem 2\n", nil)
	var b metric.Batch
	if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatal(err)
	}
	got := string(testutil.Render(t, &b))
	for _, want := range []string{"node_sockstat_sockets_used{node=\"test\"} 7", "node_sockstat_TCP_tw{node=\"test\"} 1", "node_sockstat_TCP_mem_bytes{node=\"test\"} "} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	f.Write("sockets: used 7\nTCP: inuse x\n")
	if err := f.P.Sample(context.Background(), time.Now(), &b); err == nil {
		t.Error("bad value accepted")
	}
}

func TestSplit(t *testing.T) {
	var pairs [8][]byte
	for _, tc := range []struct {
		in    string
		proto string
		n     int
		bad   bool
	}{
		{in: "TCP: inuse 1 orphan 2", proto: "TCP", n: 2},
		{in: "RAW6: inuse 0", proto: "RAW6", n: 1},
		{in: "TCP: inuse", bad: true},
		{in: "no colon", bad: true},
		{in: "X: a 1 b 2 c 3 d 4 e 5", bad: true},
	} {
		proto, n, err := sockstat.Split([]byte(tc.in), pairs[:])
		if (err != nil) != tc.bad || !tc.bad && (string(proto) != tc.proto || n != tc.n) {
			t.Errorf("Split(%q) = %q, %d, %v", tc.in, proto, n, err)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "sockstat", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte("TCP: inuse 421 orphan 0 tw 402 alloc 421 mem 146"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var pairs [32][]byte
		_, _, _ = sockstat.Split(data, pairs[:])
	})
}

// TestDuplicateLine: a protocol line repeated is an error, not twice the series.
func TestDuplicateLine(t *testing.T) {
	f := testutil.NewFileFixture(t, "sockstat", "proc/net/sockstat", "TCP: inuse 3\nTCP: inuse 4\n", nil)
	var b metric.Batch
	if err := f.P.Sample(context.Background(), time.Now(), &b); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("err = %v", err)
	}
	if len(b.Samples()) != 1 || b.Samples()[0].Value != 3 {
		t.Fatalf("samples %+v, want the first line only", b.Samples())
	}
}
