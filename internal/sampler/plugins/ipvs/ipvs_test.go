package ipvs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/ipvs"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixtures: ipv4 (NAT, direct routing, tunnel, a persistent service and an
// SCTP one), ipv6 (an IPv4 real server behind an IPv6 service, an
// IPv4-mapped and a loopback real server) and fwmark (services by firewall
// mark, with no address, next to an address one). No IPVS on the
// development VM: the values are checked against node_exporter on the
// parity fixture (cmd/vigil).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "ipvs", nil) }

func TestZeroAllocs(t *testing.T) {
	for _, d := range []string{"ipv4", "ipv6", "fwmark"} {
		testutil.ZeroAllocs(t, "ipvs", "testdata/"+d, nil)
	}
	testutil.ZeroAllocs(t, "ipvs", "testdata/ipv4", labels("proto"))
}

// Without the module the plugin is "not available", looks again every 64
// ticks without allocating in between, and starts once the files appear.
func TestModuleLoadedLater(t *testing.T) {
	data, err := readFixture("ipv4")
	if err != nil {
		t.Fatal(err)
	}
	testutil.FileAppearsLater(t, "ipvs", data, "node_ipvs_backend_weight")
}

func readFixture(dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range []string{"proc/net/ip_vs_stats", "proc/net/ip_vs"} {
		b, err := testdataFile(dir, f)
		if err != nil {
			return nil, err
		}
		out[f] = b
	}
	return out, nil
}

func labels(l ...string) *ipvs.Config {
	return &ipvs.Config{BackendLabels: l, MaxBackends: 4096}
}

// backend_labels drops labels and sums the backends that become equal,
// as node_exporter does.
func TestBackendLabels(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		// The ipv4 fixture: TCP on 80 and 443, UDP on 53, SCTP on 2905.
		{[]string{"proto"}, "active proto=SCTP 2|active proto=TCP 15|active proto=UDP 0|inactive proto=SCTP 0|inactive proto=TCP 47|inactive proto=UDP 214|weight proto=SCTP 1|weight proto=TCP 150|weight proto=UDP 1"},
		{[]string{"remote_address"}, "active remote_address=10.10.1.21 12|active remote_address=10.10.1.22 3|active remote_address=10.10.1.23 2|active remote_address=10.10.1.33 0|inactive remote_address=10.10.1.21 40|inactive remote_address=10.10.1.22 7|inactive remote_address=10.10.1.23 0|inactive remote_address=10.10.1.33 214|weight remote_address=10.10.1.21 100|weight remote_address=10.10.1.22 50|weight remote_address=10.10.1.23 1|weight remote_address=10.10.1.33 1"},
		{[]string{}, "active 17|inactive 261|weight 152"},
	} {
		p, _ := testutil.NewPlugin(t, "ipvs", "testdata/ipv4", labels(tc.labels...))
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		if got := backends(&b); got != tc.want {
			t.Errorf("labels %v:\n got %s\nwant %s", tc.labels, got, tc.want)
		}
	}
}

// backends renders the backend series of b sorted: "active k=v 1|...".
func backends(b *metric.Batch) string {
	var out []string
	for i, d := range b.Descs {
		name, ok := strings.CutPrefix(d.Name, "node_ipvs_backend_")
		if !ok {
			continue
		}
		name = strings.TrimPrefix(name, "connections_")
		s := name
		for _, l := range d.Labels {
			s += " " + l.Name + "=" + l.Value
		}
		out = append(out, fmt.Sprintf("%s %v", s, b.Values[i]))
	}
	sort.Strings(out)
	return strings.Join(out, "|")
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg     *ipvs.Config
		wantErr string
	}{
		{labels("local_address", "proto"), ""},
		{labels("local_adress"), `backend_labels: unknown label "local_adress"`},
		{&ipvs.Config{BackendLabels: ipvs.Labels[:]}, "max_backends"},
	} {
		err := tc.cfg.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", *tc.cfg, err, tc.wantErr)
		}
	}
}

func TestConfigFile(t *testing.T) {
	f, err := config.Parse("vigil.toml", []byte("[plugins.ipvs]\nbackend_labels = []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Plugins["ipvs"].(*ipvs.Config); len(c.BackendLabels) != 0 || c.MaxBackends != 4096 {
		t.Errorf("decoded %+v", c)
	}
	f, err = config.Parse("vigil.toml", []byte("[plugins.ipvs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := f.Plugins["ipvs"].(*ipvs.Config); len(c.BackendLabels) != len(ipvs.Labels) {
		t.Errorf("default labels %v", c.BackendLabels)
	}
	_, err = config.Parse("vigil.toml", []byte("[plugins.ipvs]\nbackend_labels = [\"port\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "plugins.ipvs: backend_labels") {
		t.Errorf("unknown label: err = %v", err)
	}
}

// Backends that go away lose their series and free their place under the
// bound; past it the tick says so.
func TestChurnAndBound(t *testing.T) {
	stats, _ := testdataFile("ipv4", "proc/net/ip_vs_stats")
	hdr := "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\nTCP  0A000001:0050 rr\n"
	table := func(first, n int) string {
		var s strings.Builder
		s.WriteString(hdr)
		for i := first; i < first+n; i++ {
			fmt.Fprintf(&s, "  -> 0A0001%02X:0050      Masq    1      %d          0\n", i, i)
		}
		return s.String()
	}
	cfg := labels(ipvs.Labels[:]...)
	cfg.MaxBackends = 4
	root := t.TempDir()
	f2 := root + "/proc/net/ip_vs"
	writeFile(t, root+"/proc/net/ip_vs_stats", stats)
	writeFile(t, f2, table(0, 4))
	p, _ := testutil.NewPlugin(t, "ipvs", root, cfg)
	var b metric.Batch
	sample := func() error { b.Reset(time.Now()); return p.Sample(context.Background(), time.Now(), &b) }
	if err := sample(); err != nil || b.Len() != 5+3*4 {
		t.Fatalf("4 backends: err %v, %d samples", err, b.Len())
	}
	writeFile(t, f2, table(4, 4)) // all four replaced
	if err := sample(); err != nil || b.Len() != 5+3*4 || !strings.Contains(backends(&b), "remote_address=10.0.1.7 ") {
		t.Fatalf("replaced backends: err %v, %s", err, backends(&b))
	}
	writeFile(t, f2, table(0, 5))
	if err := sample(); err == nil || !strings.Contains(err.Error(), "more than 4 backend series") || b.Len() != 5+3*4 {
		t.Fatalf("past the bound: err %v, %d samples", err, b.Len())
	}
}

func TestSampleErrors(t *testing.T) {
	stats, _ := testdataFile("ipv4", "proc/net/ip_vs_stats")
	vs, _ := testdataFile("ipv4", "proc/net/ip_vs")
	root := t.TempDir()
	writeFile(t, root+"/proc/net/ip_vs_stats", stats)
	writeFile(t, root+"/proc/net/ip_vs", vs)
	p, _ := testutil.NewPlugin(t, "ipvs", root, nil)
	var b metric.Batch
	sample := func() error { b.Reset(time.Now()); return p.Sample(context.Background(), time.Now(), &b) }
	if err := sample(); err != nil {
		t.Fatal(err)
	}
	// A bad backend table keeps the totals and fails the tick, naming the line.
	writeFile(t, root+"/proc/net/ip_vs", strings.Replace(vs, "0A0A0116:0050", "0A0A0116:00X0", 1))
	err := sample()
	if err == nil || !errors.Is(err, ipvs.ErrFormat) || !strings.Contains(err.Error(), "ip_vs: line 6: backend") || b.Len() != 5 {
		t.Fatalf("bad backend: err %v, %d samples", err, b.Len())
	}
	writeFile(t, root+"/proc/net/ip_vs_stats", "   Total Incoming\n   Conns  Packets\n   2F5A1  1C4B93E\n")
	err = sample()
	if err == nil || !strings.Contains(err.Error(), "ip_vs_stats: line 3: 2 fields, want 5") || b.Len() != 0 {
		t.Fatalf("short totals: err %v, %d samples", err, b.Len())
	}
}

func TestParseAddrPort(t *testing.T) {
	for in, want := range map[string]string{
		"0A0A0115:0050": "10.10.1.21 80",
		"c0a80001:FFFF": "192.168.0.1 65535",
		"[2001:0db8:0000:0000:0000:0000:0001:0001]:1F90": "2001:db8::1:1 8080",
		"[0000:0000:0000:0000:0000:ffff:0a0a:0121]:0035": "10.10.1.33 53",
		"0A0A0115-0050": "bad",
		"0A0A011:00050": "bad",
		"0A0A0115:005g": "bad",
		"[2001:0db8:0000:0000:0000:0000:0001:0001]-1F90": "bad",
		"[2001:0db8:0000:0000:0000:0000:0001.0001]:1F90": "bad",
		"[2001:0db8:0000:0000:0000:0000::01:0001]:1F90":  "bad",
		"": "bad",
	} {
		a, p, ok := ipvs.ParseAddrPort([]byte(in))
		got := "bad"
		if ok {
			got = fmt.Sprintf("%s %d", ipString(a), p)
		}
		if got != want {
			t.Errorf("ParseAddrPort(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestParseStats(t *testing.T) {
	st, err := ipvs.ParseStats([]byte("h\nh\n 1 A ff 10 0\n"))
	if err != nil || st != [ipvs.NumStats]uint64{1, 10, 255, 16, 0} {
		t.Fatalf("%v %v", st, err)
	}
	for in, want := range map[string]string{
		"h\nh\n 1 A ff 10 0":     "line 3: no newline",
		"h\n":                    "line 2: no newline",
		"h\nh\n 1 A ff 10 0 1\n": "line 3: 6 fields",
		"h\nh\n 1 A fg 10 0\n":   `line 3 field 3: "fg"`,
	} {
		if _, err := ipvs.ParseStats([]byte(in)); err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ipvs.ErrFormat) {
			t.Errorf("ParseStats(%q) = %v, want %q", in, err, want)
		}
	}
}

// The scanner follows procfs on odd lines: short ones are skipped, a
// backend before any service has empty service fields.
func TestScanner(t *testing.T) {
	var s ipvs.Scanner
	s.Reset([]byte("  -> 0A000001:0050 Masq 1 2 3\nTCP\n  -> 0A000002:0050 Masq\n\nUDP  0A000009:0035 rr\n  -> 0A000003:0035 Route 4 5 6\n"))
	var got []string
	for s.Next() {
		got = append(got, fmt.Sprintf("%s/%v/%s:%d/%d,%d,%d", s.B.Proto, s.B.HasLocal, ipString(s.B.Remote), s.B.RemotePort, s.B.Weight, s.B.Active, s.B.Inactive))
	}
	if want := "/false/10.0.0.1:80/1,2,3 UDP/true/10.0.0.3:53/4,5,6"; strings.Join(got, " ") != want || s.Err() != nil {
		t.Errorf("got %v (err %v), want %s", got, s.Err(), want)
	}
	for in, want := range map[string]string{
		"TCP  0A000009:0035 rr\n  -> 0A000003:0035 Route -4 5 6\n": `line 2: field 4: "-4" is not a count`,
		"TCP  zz rr\n":                `line 1: service TCP "zz": want HEXIP:PORT`,
		"FWM  0123456789abcdef0 rr\n": "line 1: firewall mark",
	} {
		s.Reset([]byte(in))
		for s.Next() {
		}
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ipvs.ErrFormat) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "ipvs", "testdata/ipv6", nil)
	testutil.BenchTicks(b, p)
}

// FuzzParse: no input makes the parsers panic, loop or return backends
// with names past the bound.
func FuzzParse(f *testing.F) {
	for _, d := range []string{"ipv4", "ipv6", "fwmark"} {
		vs, _ := testdataFile(d, "proc/net/ip_vs")
		f.Add([]byte(vs))
	}
	st, _ := testdataFile("ipv4", "proc/net/ip_vs_stats")
	f.Add([]byte(st))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ipvs.ParseStats(data)
		var s ipvs.Scanner
		s.Reset(data)
		for n := 0; s.Next(); n++ {
			if n > len(data) || len(s.B.Proto) > 16 || len(s.B.Mark) > 16 {
				t.Fatalf("backend %d: %+v", n, s.B)
			}
		}
	})
}

// BenchmarkTickLarge: 100 services of 10 real servers each (a load
// balancer's table), from a root written under IPVS_BENCH_ROOT if set
// (to compare with node_exporter on the same files), else a temp dir.
func BenchmarkTickLarge(b *testing.B) {
	root := os.Getenv("IPVS_BENCH_ROOT")
	if root == "" {
		root = b.TempDir()
	}
	stats, _ := testdataFile("ipv4", "proc/net/ip_vs_stats")
	var s strings.Builder
	s.WriteString("IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n")
	for svc := 0; svc < 100; svc++ {
		fmt.Fprintf(&s, "TCP  0A00%04X:0050 wlc\n", svc)
		for r := 0; r < 10; r++ {
			fmt.Fprintf(&s, "  -> 0A01%02X%02X:0050      Masq    100    %-10d %-10d\n", svc, r, svc*r, svc+r)
		}
	}
	for rel, content := range map[string]string{"proc/net/ip_vs_stats": stats, "proc/net/ip_vs": s.String()} {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	p, _ := testutil.NewPlugin(b, "ipvs", root, nil)
	testutil.BenchTicks(b, p)
}
