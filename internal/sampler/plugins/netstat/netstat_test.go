package netstat_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/netstat"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "netstat", nil) }

func all() sampler.Configurable { return &netstat.Config{Fields: ".*"} }

// TestAllFields: fields = ".*" exports every counter of the three files.
func TestAllFields(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "netstat", "testdata/basic", all())
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b); err != nil {
		t.Fatal(err)
	}
	if b.Len() < 300 {
		t.Fatalf("%d series with every field, want the whole files", b.Len())
	}
	testutil.Golden(t, "testdata/basic/want-all.txt", testutil.Render(t, &b))
}

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "netstat", "testdata/basic", nil)
	testutil.ZeroAllocs(t, "netstat", "testdata/basic", all())
	testutil.ZeroAllocs(t, "netstat", "testdata/no6", nil)
}

func TestBadConfig(t *testing.T) {
	if err := (&netstat.Config{Fields: "("}).Validate(); err == nil {
		t.Fatal("bad regexp accepted")
	}
}

// TestKernelAddsField: a new kernel field (new header) shows without a restart.
func TestKernelAddsField(t *testing.T) {
	f := testutil.NewFileFixture(t, "netstat", "proc/net/snmp", "Tcp: CurrEstab\nTcp: 5\n", all())
	get := func() string {
		var b metric.Batch
		if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		return string(testutil.Render(t, &b))
	}
	if got := get(); !strings.Contains(got, "node_netstat_Tcp_CurrEstab{node=\"test\"} 5") {
		t.Fatalf("got %s", got)
	}
	f.Write("Tcp: MaxConn CurrEstab\nTcp: -1 6\n")
	got := get()
	if !strings.Contains(got, "node_netstat_Tcp_CurrEstab{node=\"test\"} 6") || !strings.Contains(got, "node_netstat_Tcp_MaxConn{node=\"test\"} -1") {
		t.Fatalf("after the new field: %s", got)
	}
}

func TestParsePairs(t *testing.T) {
	names, vals := make([][]byte, 0, 4), make([][]byte, 0, 4)
	for _, tc := range []struct {
		in  string
		ok  bool
		got string
	}{
		{in: "Ip: A B\nIp: 1 2\nUdp: C\nUdp: 3\n", ok: true, got: "Ip_A=1 Ip_B=2 Udp_C=3 "},
		{in: "Ip: A B\nIp: 1\n", ok: false},
		{in: "Ip: A\nTcp: 1\n", ok: false},
		{in: "Ip: A\n", ok: false},
		{in: "Ip: A B C D E\nIp: 1 2 3 4 5\n", ok: false}, // more fields than room
	} {
		var sb strings.Builder
		err := netstat.ParsePairs([]byte(tc.in), names, vals, func(_ int, _, proto []byte, n, v [][]byte) {
			for i := range n {
				sb.WriteString(string(proto) + "_" + string(n[i]) + "=" + string(v[i]) + " ")
			}
		})
		if (err == nil) != tc.ok || tc.ok && sb.String() != tc.got {
			t.Errorf("ParsePairs(%q) = %q, %v", tc.in, sb.String(), err)
		}
	}
}

func TestSplitSNMP6(t *testing.T) {
	for in, want := range map[string]string{"Ip6InReceives": "Ip6 InReceives", "Udp6InErrors": "Udp6 InErrors", "UdpLite6InErrors": "UdpLite6 InErrors", "Icmp6OutType133": "Icmp6 OutType133"} {
		p, f, ok := netstat.SplitSNMP6([]byte(in))
		if !ok || string(p)+" "+string(f) != want {
			t.Errorf("SplitSNMP6(%q) = %q %q", in, p, f)
		}
	}
	if _, _, ok := netstat.SplitSNMP6([]byte("NoSix")); ok {
		t.Error("a name without 6 was split")
	}
}

func TestParseValue(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "-1": -1, "18446744073709551615": 18446744073709551615} {
		if got, err := netstat.ParseValue([]byte(in)); err != nil || got != want {
			t.Errorf("ParseValue(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := netstat.ParseValue([]byte("1.5")); err == nil {
		t.Error("1.5 accepted")
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "netstat", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParsePairs(f *testing.F) {
	f.Add([]byte("Ip: A B\nIp: 1 2\n"))
	names, vals := make([][]byte, 0, 16), make([][]byte, 0, 16)
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = netstat.ParsePairs(data, names, vals, func(_ int, _, _ []byte, n, v [][]byte) {
			if len(n) != len(v) {
				t.Fatalf("%d names, %d values", len(n), len(v))
			}
		})
		_ = netstat.ParseSNMP6(data, func(int, []byte, []byte) {})
	})
}

// TestDuplicateField: a protocol listed twice is exported once and reported.
func TestDuplicateField(t *testing.T) {
	f := testutil.NewFileFixture(t, "netstat", "proc/net/snmp", "Tcp: CurrEstab\nTcp: 5\nTcp: CurrEstab\nTcp: 6\n", all())
	var b metric.Batch
	err := f.P.Sample(context.Background(), time.Now(), &b)
	if err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("err = %v, want the duplicate reported", err)
	}
	if len(b.Samples()) != 1 || b.Samples()[0].Value != 5 {
		t.Fatalf("samples %+v, want the first only", b.Samples())
	}
}
