package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// The test binary doubles as the vigil binary: with VIGIL_E2E_MAIN=1 it runs
// main() on its arguments, so end-to-end tests exercise the real program.
func TestMain(m *testing.M) {
	if os.Getenv("VIGIL_E2E_MAIN") == "1" {
		os.Args = append([]string{"vigil"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

func vigil(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "VIGIL_E2E_MAIN=1", "VIGIL_SAMPLER_INPROCESS=1")
	return cmd
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := vigil(t, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// e2ePlugins are the plugins whose whole output is fixed by the fixture tree.
const e2ePlugins = "cpu,memory,vmstat,load,netdev,diskstats,pressure,netstat,sockstat,softnet,filefd,entropy,netclass,os,uname,conntrack,processes,edac,thermal_zone,cpufreq,hwmon,nfs,mdadm"

// e2eSyscallPlugins read the running kernel, not the fixture tree (time,
// adjtimex); their output is compared by series shape only.
const e2eSyscallPlugins = "time,timex"

// neCollectors are node_exporter's collectors that e2ePlugins and
// e2eSyscallPlugins replace.
var neCollectors = []string{"cpu", "meminfo", "vmstat", "loadavg", "netdev", "diskstats", "stat",
	"pressure", "netstat", "sockstat", "softnet", "filefd", "entropy", "netclass", "os", "uname", "time", "timex", "conntrack", "processes", "edac", "thermal_zone", "cpufreq", "hwmon", "nfs", "mdadm",
	"textfile", "meminfo_numa", "schedstat", "nvme", "arp", "udp_queues", "dmi", "powersupplyclass", "nfsd", "xfs", "zfs", "tapestats", "fibrechannel", "selinux", "bcache", "btrfs", "ipvs"}

// e2eParityPlugins are compared with node_exporter but not in the golden
// (textfile reports the files' mtimes, which are the checkout's); e2eConfig
// gives the textfile directory, under the root, and turns on bcache's
// priority stats.
const (
	e2eParityPlugins = "textfile,meminfo_numa,schedstat,nvme,arp,udp_queues,dmi,powersupplyclass,nfsd,xfs,zfs,tapestats,fibrechannel,selinux,bcache,btrfs,ipvs"
	e2eConfig        = "[plugins.textfile]\ndirectory = \"textfile\"\n[plugins.bcache]\npriority_stats = true\n"
)

func TestE2EVersion(t *testing.T) {
	out, _, code := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "vigil ") {
		t.Fatalf("version: code %d, output %q", code, out)
	}
}

func TestE2ESampleOnceGolden(t *testing.T) {
	out, errOut, code := run(t, "sample", "--once", "--root", "testdata/node1", "--plugins", e2ePlugins, "--node", "test")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	testutil.Golden(t, "testdata/node1.want.txt", []byte(out))
}

func TestE2ECheckConfig(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(good, []byte("[sampler]\ninterval = \"100ms\"\n"), 0o644)
	os.WriteFile(bad, []byte("[sampler]\ninterval = \"1s\"\nfrobnicate = true\n"), 0o644)
	if _, e, code := run(t, "check-config", good); code != 0 {
		t.Errorf("good config: exit %d: %s", code, e)
	}
	_, e, code := run(t, "check-config", bad)
	if code == 0 || !strings.Contains(e, bad+":3:") || !strings.Contains(e, "frobnicate") {
		t.Errorf("bad config: exit %d, stderr %q; want non-zero and %s:3: naming the key", code, e, bad)
	}
	// The printed sample config must itself be valid.
	sample, _, code := run(t, "sampler", "--sample-config")
	if code != 0 {
		t.Fatalf("--sample-config exit %d", code)
	}
	sf := filepath.Join(dir, "sample.toml")
	os.WriteFile(sf, []byte(sample), 0o644)
	if _, e, code := run(t, "check-config", sf); code != 0 {
		t.Errorf("sample config does not validate: %s", e)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func scrape(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// The daemon runs with no config file, samples at 100ms and serves /metrics.
func TestE2ESamplerDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	addr := freePort(t)
	cmd := vigil(t, "sampler", "--root", "testdata/node1", "--interval", "100ms", "--listen", addr, "--node", "e2e")
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sampler did not exit cleanly on SIGINT: %v\n%s", err, errBuf.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Error("sampler did not stop within 10s of SIGINT")
		}
	}()
	var body string
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		b, err := scrape("http://" + addr + "/metrics")
		if err == nil && strings.Contains(b, "node_load1{") && strings.Contains(b, "vigil_sampler_ticks_total") {
			body = b
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if body == "" {
		t.Fatalf("no metrics served within 15s; stderr:\n%s", errBuf.String())
	}
	vals := parseText(t, body)
	if v := vals[`node_load1{node="e2e"}`]; v != mustLoad1(t) {
		t.Errorf("node_load1 = %v, want the fixture's value", v)
	}
	// Ticks advance at 100ms.
	first := vals[`vigil_sampler_ticks_total{node="e2e"}`]
	time.Sleep(time.Second)
	b, _ := scrape("http://" + addr + "/metrics")
	second := parseText(t, b)[`vigil_sampler_ticks_total{node="e2e"}`]
	if second-first < 3 {
		t.Errorf("ticks advanced by %v in 1s at a 100ms interval", second-first)
	}
}

func mustLoad1(t *testing.T) float64 {
	b, err := os.ReadFile("testdata/node1/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// parseText maps series (name{labels} as printed) to values.
func parseText(t *testing.T, s string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad value in %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// canonical drops the node label vigil adds (node="x"; meminfo_numa's
// node label stays) and sorts labels so two exporters' series names can be
// compared.
func canonical(series string) string {
	name, rest, ok := strings.Cut(series, "{")
	if !ok {
		return series
	}
	rest = strings.TrimSuffix(rest, "}")
	var labels []string
	for _, l := range splitLabels(rest) {
		// a label with an empty value is no label (textfile series)
		if l != `node="x"` && !strings.HasSuffix(l, `=""`) {
			labels = append(labels, l)
		}
	}
	sort.Strings(labels)
	if len(labels) == 0 {
		return name
	}
	return name + "{" + strings.Join(labels, ",") + "}"
}

func splitLabels(s string) []string {
	var out []string
	inQ := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			inQ = !inQ
		case ',':
			if !inQ {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// scrapeNodeExporter runs node_exporter (ne) with args and a listen address,
// scrapes it once and stops it. A free port can be taken between our probe
// and node_exporter's bind, so it tries a few ports, and says why if
// node_exporter never answers.
func scrapeNodeExporter(t *testing.T, ne string, args []string, wait time.Duration) string {
	t.Helper()
	var body string
	var neErr bytes.Buffer
	for attempt := 0; attempt < 3 && body == ""; attempt++ {
		addr := freePort(t)
		ctx, cancel := context.WithTimeout(context.Background(), wait+30*time.Second)
		neErr.Reset()
		cmd := exec.CommandContext(ctx, ne, append(slices.Clone(args), "--web.listen-address="+addr)...)
		cmd.Stderr = &neErr
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); {
			if b, err := scrape("http://" + addr + "/metrics"); err == nil {
				body = b
				break
			}
			select {
			case <-exited:
				deadline = time.Time{}
			case <-time.After(100 * time.Millisecond):
			}
		}
		cancel()
		<-exited
	}
	if body == "" {
		t.Fatalf("node_exporter did not answer; its stderr:\n%s", neErr.String())
	}
	return body
}

// TestE2ENodeExporterParity runs Debian's prometheus-node-exporter on the
// same fixture tree and checks every value it reports for the collectors we
// replace is reported by vigil with the same name, labels and value.
func TestE2ENodeExporterParity(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	ne := testutil.LookPeer(t, "prometheus-node-exporter", "apt-get install prometheus-node-exporter")
	root, _ := filepath.Abs("testdata/node1")
	args := []string{"--path.procfs=" + root + "/proc", "--path.sysfs=" + root + "/sys", "--path.rootfs=" + root,
		"--collector.disable-defaults", "--no-collector.netdev.netlink",
		"--collector.textfile.directory=" + root + "/textfile", "--collector.bcache.priorityStats"}
	for _, c := range neCollectors {
		args = append(args, "--collector."+c)
	}
	body := scrapeNodeExporter(t, ne, args, 30*time.Second)
	theirs := parseText(t, body)
	for _, c := range neCollectors {
		// A collector that failed on the fixture would make its part of
		// the comparison vacuous.
		if v, ok := theirs[`node_scrape_collector_success{collector="`+c+`"}`]; !ok || v != 1 {
			t.Errorf("node_exporter's %s collector did not succeed on the fixture tree", c)
		}
	}
	cfg := filepath.Join(t.TempDir(), "vigil.toml")
	if err := os.WriteFile(cfg, []byte(e2eConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "sample", "--once", "--config", cfg, "--root", "testdata/node1",
		"--plugins", e2ePlugins+","+e2eSyscallPlugins+","+e2eParityPlugins, "--node", "x")
	if code != 0 {
		t.Fatalf("sample: exit %d: %s", code, errOut)
	}
	ours := map[string]float64{}
	shapes := map[string]float64{}
	for k, v := range parseText(t, out) {
		ours[canonical(k)] = v
		shapes[shape(k)] = v
	}
	skip := []string{"go_", "process_", "promhttp_", "node_scrape_", "node_exporter_", "node_disk_info", "node_cpu_info"}
	// Series of the running kernel or clock: node_exporter reads them with
	// syscalls that ignore --path.*, so only names and label names compare.
	byShape := []string{"node_uname_info", "node_timex_", "node_time_seconds"}
	// Debian's 1.5 reads these NFSv4 operations two places early (procfs
	// before v0.11 took SETCLIENTID for VERIFY, …); vigil reads them where
	// the kernel writes them, as node_exporter 1.6+ does: presence only.
	presenceOnly := []string{`node_nfsd_requests_total{method="RelLockOwner",proto="4"}`,
		`node_nfsd_requests_total{method="Verify",proto="4"}`, `node_nfsd_requests_total{method="Write",proto="4"}`}
	compared := 0
	var missing, differ []string
	for k, v := range theirs {
		// node_exporter names a text file by the path it was given
		k = canonical(strings.Replace(k, `file="`+root+"/", `file="`, 1))
		if hasAnyPrefix(k, skip) {
			continue
		}
		compared++
		if hasAnyPrefix(k, presenceOnly) {
			if _, ok := ours[k]; !ok {
				missing = append(missing, k)
			}
			continue
		}
		if hasAnyPrefix(k, byShape) {
			if _, ok := shapes[shape(k)]; !ok {
				missing = append(missing, shape(k))
			}
			continue
		}
		ov, ok := ours[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case !(ov == v || math.Abs(ov-v) <= 1e-9*math.Abs(v) || math.IsNaN(ov) && math.IsNaN(v)):
			differ = append(differ, fmt.Sprintf("%s: vigil %v, node_exporter %v", k, ov, v))
		}
	}
	sort.Strings(missing)
	sort.Strings(differ)
	if compared < 100 {
		t.Errorf("only %d node_exporter series compared; fixture or flags wrong?", compared)
	}
	if len(missing) > 0 {
		t.Errorf("%d series node_exporter has and vigil lacks:\n%s", len(missing), strings.Join(missing, "\n"))
	}
	if len(differ) > 0 {
		t.Errorf("%d values differ:\n%s", len(differ), strings.Join(differ, "\n"))
	}
	t.Logf("compared %d series with node_exporter", compared)
}

// shape is a series' name and label names, without label values.
func shape(series string) string {
	name, rest, ok := strings.Cut(canonical(series), "{")
	if !ok {
		return name
	}
	var names []string
	for _, l := range splitLabels(strings.TrimSuffix(rest, "}")) {
		n, _, _ := strings.Cut(l, "=")
		names = append(names, n)
	}
	return name + "{" + strings.Join(names, ",") + "}"
}

func hasAnyPrefix(s string, ps []string) bool {
	for _, p := range ps {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
