package netdev_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/netdev"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "netdev", nil) }

func TestFilter(t *testing.T) {
	cfg := func() sampler.Configurable {
		reg, _ := sampler.Lookup("netdev")
		c := reg.NewConfig().(*netdev.Config)
		c.DeviceInclude = []string{"e*", "ib?", "lo", "veth*"}
		c.DeviceExclude = []string{"lo", "veth*"}
		return c
	}
	p, _ := testutil.NewPlugin(t, "netdev", "testdata/basic", cfg())
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b); err != nil {
		t.Fatal(err)
	}
	devs := map[string]int{}
	for _, s := range b.Samples() {
		devs[s.Desc.Labels[0].Value]++
	}
	// eno1 has sysfs statistics/rx_nohandler; ib0's is not a number, so
	// it has only the /proc/net/dev counters.
	want := map[string]int{"eno1": netdev.NumCols + 1, "ib0": netdev.NumCols}
	if fmt.Sprint(devs) != fmt.Sprint(want) {
		t.Errorf("series per device = %v, want %v", devs, want)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg     netdev.Config
		wantErr string
	}{
		{cfg: netdev.Config{MaxDevices: 1, DeviceInclude: []string{"eth*"}, DeviceExclude: []string{"veth[0-9]*"}}},
		{cfg: netdev.Config{MaxDevices: 1, DeviceExclude: []string{"veth[0-9"}}, wantErr: `"veth[0-9"`},
		{cfg: netdev.Config{MaxDevices: 1, DeviceInclude: []string{`eth\`}}, wantErr: `"eth\\"`},
		{cfg: netdev.Config{MaxDevices: 0}, wantErr: "max_devices"},
	} {
		err := tc.cfg.Validate()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Validate(%+v) = %v, want error containing %q", tc.cfg, err, tc.wantErr)
		}
	}
}

func TestSampleErrors(t *testing.T) {
	for _, tc := range []struct{ root, want string }{
		{"testdata/truncated", "testdata/truncated/proc/net/dev: unexpected /proc/net/dev format: line 5 (\"eno1\"): 7 counters, want 16"},
		{"testdata/missing", "no such file"},
	} {
		p, _ := testutil.NewPlugin(t, "netdev", tc.root, nil)
		var b metric.Batch
		err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.root, err, tc.want)
		}
	}
}

// TestDeviceChurn checks that interfaces that disappear are forgotten and
// that the cache never exceeds max_devices.
func TestDeviceChurn(t *testing.T) {
	root := t.TempDir()
	reg, _ := sampler.Lookup("netdev")
	cfg := reg.NewConfig().(*netdev.Config)
	cfg.MaxDevices = 8
	p, _ := testutil.NewPlugin(t, "netdev", root, cfg)
	fs := kernfs.NewFS(root)
	write := func(devs ...string) {
		t.Helper()
		var sb strings.Builder
		sb.WriteString(header)
		for _, d := range devs {
			fmt.Fprintf(&sb, "%s: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", d)
		}
		writeFile(t, fs.Path("proc", "net", "dev"), sb.String())
	}
	var b metric.Batch
	now := time.Unix(1700000000, 0)
	for i := range 200 {
		write("eth0", fmt.Sprintf("veth%d", i))
		b.Reset(now)
		if err := p.Sample(context.Background(), now, &b); err != nil {
			t.Fatal(err)
		}
		if b.Len() != 2*netdev.NumCols {
			t.Fatalf("tick %d: %d samples, want %d", i, b.Len(), 2*netdev.NumCols)
		}
		if n := netdev.CachedDevices(p); n > cfg.MaxDevices {
			t.Fatalf("tick %d: %d cached devices, bound is %d", i, n, cfg.MaxDevices)
		}
	}
	// eth0 was seen every tick and must have kept its descriptors.
	first := b.Samples()[0].Desc
	b.Reset(now)
	write("eth0")
	if err := p.Sample(context.Background(), now, &b); err != nil {
		t.Fatal(err)
	}
	if b.Samples()[0].Desc != first {
		t.Errorf("eth0 descriptor was re-created")
	}
}

const header = "Inter-|   Receive                                                |  Transmit\n" +
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // "dev=v0,v1,...;" per interface
		wantErr  string
	}{
		{name: "empty table", in: header},
		{name: "one", in: header + "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
			want: "eth0=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16;"},
		{name: "no blank after colon and no final newline", in: header + "eth0:1 0 0 0 0 0 0 0 2 0 0 0 0 0 0 0",
			want: "eth0=1,0,0,0,0,0,0,0,2,0,0,0,0,0,0,0;"},
		{name: "max uint64", in: header + "x: 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
			want: "x=18446744073709551615,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0;"},
		{name: "blank lines skipped", in: header + "\n a: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1\n\n",
			want: "a=0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1;"},
		{name: "empty file", in: "", wantErr: "header"},
		{name: "one header line", in: "Inter-|   Receive |  Transmit\n", wantErr: "header"},
		{name: "wrong column", in: strings.Replace(header, "colls", "collisions", 1), wantErr: `transmit column 6 is "collisions"`},
		{name: "extra column", in: strings.Replace(header, "multicast|", "multicast extra|", 1), wantErr: "more than 8 receive columns"},
		{name: "missing column", in: strings.Replace(header, " carrier", "", 1), wantErr: `transmit column 7 is "compressed"`},
		{name: "no colon", in: header + "eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", wantErr: "line 3: no \"interface:\""},
		{name: "empty name", in: header + " : 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", wantErr: "line 3"},
		{name: "short line", in: header + "eth0: 1 2 3\n", wantErr: "3 counters, want 16"},
		{name: "long line", in: header + "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n", wantErr: "more than 16"},
		{name: "negative", in: header + "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 -16\n", wantErr: `transmit_compressed "-16"`},
		{name: "overflow", in: header + "eth0: 18446744073709551616 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", wantErr: "receive_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sb strings.Builder
			err := netdev.Parse([]byte(tc.in), func(name []byte, v [netdev.NumCols]uint64) {
				sb.Write(name)
				sb.WriteByte('=')
				for i, x := range v {
					if i > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprint(&sb, x)
				}
				sb.WriteByte(';')
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, netdev.ErrFormat) {
					t.Fatalf("err = %v, want ErrFormat containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sb.String() != tc.want {
				t.Errorf("got %q, want %q", sb.String(), tc.want)
			}
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "netdev", "testdata/basic", nil)
	if runtime.GOOS == "linux" {
		t.Run("netlink", func(t *testing.T) { testutil.ZeroAllocs(t, "netdev", "/", nil) })
	}
}

// TestNetlinkMatchesProc samples this machine's interfaces over netlink
// between two readings of /proc/net/dev and sysfs: the same series, each
// counter between its two file readings.
func TestNetlinkMatchesProc(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("netlink is Linux's")
	}
	files := func() sampler.Configurable {
		reg, _ := sampler.Lookup("netdev")
		c := reg.NewConfig().(*netdev.Config)
		c.Netlink = false
		return c
	}
	pf, _ := testutil.NewPlugin(t, "netdev", "/", files())
	pn, _ := testutil.NewPlugin(t, "netdev", "/", nil)
	defer pf.(io.Closer).Close()
	defer pn.(io.Closer).Close()
	if netdev.UsesNetlink(pf) || !netdev.UsesNetlink(pn) {
		t.Fatalf("netlink used: files plugin %v, default plugin %v", netdev.UsesNetlink(pf), netdev.UsesNetlink(pn))
	}
	sample := func(p sampler.Plugin) map[string]float64 {
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		m := map[string]float64{}
		for _, s := range b.Samples() {
			m[s.Desc.Name+"{"+s.Desc.Labels[0].Value+"}"] = s.Value
		}
		return m
	}
	for round := range 3 {
		before, nl, after := sample(pf), sample(pn), sample(pf)
		if len(nl) == 0 || len(nl) != len(before) || len(nl) != len(after) {
			t.Fatalf("round %d: %d series over netlink, %d and %d from the files", round, len(nl), len(before), len(after))
		}
		for k, v := range nl {
			lo, ok := before[k]
			if !ok {
				t.Errorf("round %d: %s over netlink only", round, k)
				continue
			}
			if v < lo || v > after[k] {
				t.Errorf("round %d: %s = %v over netlink, %v then %v from the files", round, k, v, lo, after[k])
			}
		}
	}
}

func BenchmarkSample(b *testing.B) {
	for _, n := range []int{4, 64, 512} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			root := b.TempDir()
			var sb strings.Builder
			sb.WriteString(header)
			for i := range n {
				fmt.Fprintf(&sb, "veth%04d: 123456789 98765 0 0 0 0 0 12 987654321 87654 0 1 0 0 0 0\n", i)
			}
			writeFile(b, kernfs.NewFS(root).Path("proc", "net", "dev"), sb.String())
			p, _ := testutil.NewPlugin(b, "netdev", root, nil)
			testutil.BenchTicks(b, p)
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(header + "  eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"))
	f.Add([]byte(header + "eth0:1 2\n"))
	f.Add([]byte("a|b|c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		err := netdev.Parse(data, func(name []byte, v [netdev.NumCols]uint64) {
			if len(name) == 0 {
				t.Fatalf("empty interface name from %q", data)
			}
			n++
		})
		if err != nil && !errors.Is(err, netdev.ErrFormat) {
			t.Fatalf("error %v does not wrap ErrFormat", err)
		}
	})
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConfigFile checks the [plugins.netdev] table end to end through the
// strict config decoder.
func TestConfigFile(t *testing.T) {
	f, err := config.Parse("vigil.toml", []byte("[plugins.netdev]\ndevice_include = [\"eth*\"]\ndevice_exclude = [\"eth9\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Plugins["netdev"].(*netdev.Config)
	if fmt.Sprint(c.DeviceInclude, c.DeviceExclude, c.MaxDevices) != "[eth*] [eth9] 1024" {
		t.Errorf("decoded %+v", c)
	}
	_, err = config.Parse("vigil.toml", []byte("[plugins.netdev]\ndevice_exclude = [\"eth[\"]\n"))
	if err == nil || !strings.Contains(err.Error(), `vigil.toml:1: plugins.netdev: device pattern "eth["`) {
		t.Errorf("bad glob: err = %v", err)
	}
}

// netnsEnv names the variable under which this test binary runs inside a
// network namespace of its own (TestNetlinkFollowsLinks).
const netnsEnv = "VIGIL_NETDEV_IN_NETNS"

// TestNetlinkFollowsLinks watches the kernel's own link notifications: in
// a network namespace of its own (unshare --net, root), a veth pair
// created, renamed and removed by ip(8) shows up, moves to its new name
// and goes, each on the next tick.
func TestNetlinkFollowsLinks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("netlink is Linux's")
	}
	testutil.LookPeer(t, "ip", "apt-get install iproute2")
	if !testutil.InNamespace(t, netnsEnv, "--net") {
		return
	}
	p, _ := testutil.NewPlugin(t, "netdev", "/", nil)
	defer p.(io.Closer).Close()
	if !netdev.UsesNetlink(p) {
		t.Fatal("not reading netlink")
	}
	devices := func() string {
		var b metric.Batch
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, s := range b.Samples() {
			n[s.Desc.Labels[0].Value]++
		}
		var out []string
		for d, k := range n {
			if k != netdev.NumCols+1 {
				t.Errorf("%s has %d series, want %d", d, k, netdev.NumCols+1)
			}
			out = append(out, d)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	ip := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if got := devices(); got != "lo" {
		t.Fatalf("a new namespace: %q, want lo", got)
	}
	for _, step := range []struct {
		ip   []string
		want string
	}{
		{[]string{"link", "add", "vt-a", "type", "veth", "peer", "name", "vt-b"}, "lo vt-a vt-b"},
		{[]string{"link", "set", "vt-a", "name", "vt-c"}, "lo vt-b vt-c"},
		{[]string{"link", "del", "vt-c"}, "lo"}, // removes its peer too
	} {
		ip(step.ip...)
		if got := devices(); got != step.want {
			t.Errorf("after ip %s: %q, want %q", strings.Join(step.ip, " "), got, step.want)
		}
	}

	// Hundreds of interfaces at once: more notifications than the socket
	// holds (ENOBUFS), so the names are dumped again within the tick; both
	// dumps span several datagrams. Then a dump of the names with all of
	// them there.
	batch := filepath.Join(t.TempDir(), "batch")
	var sb strings.Builder
	want := []string{"lo"}
	for i := range 300 {
		fmt.Fprintf(&sb, "link add va%03d type veth peer name vb%03d\n", i, i)
		want = append(want, fmt.Sprintf("va%03d", i), fmt.Sprintf("vb%03d", i))
	}
	slices.Sort(want)
	writeFile(t, batch, sb.String())
	ip("-batch", batch)
	if got := devices(); got != strings.Join(want, " ") {
		t.Errorf("after adding 600 interfaces: %d of them, want %d", len(strings.Fields(got)), len(want))
	}
	netdev.Resync(p)
	if got := devices(); got != strings.Join(want, " ") {
		t.Errorf("after dumping the links again: %d interfaces, want %d", len(strings.Fields(got)), len(want))
	}
}
