package main

import (
	"bytes"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// copyTree copies the directory src into dst (plain files and dirs).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// `vigil sample --once --root DIR --plugins infiniband,power` prints
// node_exporter's series for the plugins' fixture trees (an mlx4 with a
// saturated 32-bit counter, two mlx5, a two-socket RAPL), value for value
// as node_exporter 1.5 reads the same tree. The one series node_exporter
// has and vigil leaves out on purpose is the saturated counter.
func TestE2EInfinibandPowerParity(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	root := t.TempDir()
	plugins := "../../internal/sampler/plugins/"
	copyTree(t, plugins+"infiniband/testdata/mlx4/sys", filepath.Join(root, "sys"))
	copyTree(t, plugins+"infiniband/testdata/mlx5/sys", filepath.Join(root, "sys"))
	copyTree(t, plugins+"power/testdata/server/sys", filepath.Join(root, "sys"))

	out, errOut, code := run(t, "sample", "--once", "--root", root, "--plugins", "infiniband,power", "--node", "x")
	if code != 0 {
		t.Fatalf("sample: exit %d: %s", code, errOut)
	}
	ours := map[string]float64{}
	for k, v := range parseText(t, out) {
		ours[canonical(k)] = v
	}
	for _, want := range []string{
		`node_infiniband_port_data_received_bytes_total{device="mlx5_0",port="1"}`,
		`node_infiniband_out_of_buffer_drops_total{device="mlx5_0",port="1"}`,
		`node_rapl_package_joules_total{index="1",path="/sys/class/powercap/intel-rapl:1"}`,
	} {
		if _, ok := ours[want]; !ok {
			t.Errorf("vigil sample lacks %s", want)
		}
	}

	ne := testutil.LookPeer(t, "prometheus-node-exporter", "apt-get install prometheus-node-exporter")
	body := scrapeNodeExporter(t, ne, []string{"--path.sysfs=" + root + "/sys", "--path.procfs=" + root + "/proc",
		"--collector.disable-defaults", "--collector.infiniband", "--collector.rapl"}, 10*time.Second)
	theirs := parseText(t, body)
	for _, c := range []string{"infiniband", "rapl"} {
		if v := theirs[`node_scrape_collector_success{collector="`+c+`"}`]; v != 1 {
			t.Fatalf("node_exporter's %s collector failed on the fixture", c)
		}
	}
	saturated := `node_infiniband_port_data_transmitted_bytes_total{device="mlx4_0",port="1"}`
	compared := 0
	var missing, differ []string
	for k, v := range theirs {
		if !strings.HasPrefix(k, "node_infiniband_") && !strings.HasPrefix(k, "node_rapl_") {
			continue
		}
		k = canonical(strings.Replace(k, `path="`+root, `path="`, 1))
		compared++
		ov, ok := ours[k]
		switch {
		case k == saturated:
			if ok {
				t.Errorf("the saturated counter is exported: %s %v", k, ov)
			}
		case !ok:
			missing = append(missing, k)
		case math.Abs(ov-v) > 1e-9*math.Abs(v):
			differ = append(differ, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(differ)
	if compared < 100 {
		t.Errorf("only %d series compared", compared)
	}
	if len(missing)+len(differ) > 0 {
		t.Errorf("missing in vigil:\n%s\ndiffering:\n%s", strings.Join(missing, "\n"), strings.Join(differ, "\n"))
	}
	t.Logf("compared %d series with node_exporter", compared)
}

// Since Linux 5.10 RAPL's energy_uj is readable by root only. A sampler
// run as another user (here: setpriv to nobody) warns once, naming the
// zones it cannot read, leaves them out, counts them, and samples the rest.
func TestE2EPowerUnreadableZone(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to another user")
	}
	setpriv := testutil.LookPeer(t, "setpriv", "apt-get install util-linux")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Everything nobody must reach: a copy of this binary, the fixture.
	dir, err := os.MkdirTemp("", "vigil-power-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "vigil")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	for zone, mode := range map[string]os.FileMode{"intel-rapl:0": 0o400, "intel-rapl:1": 0o444} {
		z := filepath.Join(root, "sys/class/powercap", zone)
		if err := os.MkdirAll(z, 0o755); err != nil {
			t.Fatal(err)
		}
		name := "package-" + zone[len(zone)-1:]
		os.WriteFile(filepath.Join(z, "name"), []byte(name+"\n"), 0o444)
		os.WriteFile(filepath.Join(z, "max_energy_range_uj"), []byte("262143328850\n"), 0o444)
		os.WriteFile(filepath.Join(z, "energy_uj"), []byte("5000000\n"), mode)
		os.Chmod(filepath.Join(z, "energy_uj"), mode)
	}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"sample", "--once", "--root", root, "--plugins", "power", "--node", "x")
	cmd.Env = append(os.Environ(), "VIGIL_E2E_MAIN=1", "VIGIL_SAMPLER_INPROCESS=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("sample as nobody: %v\n%s", err, e.String())
	}
	got := map[string]float64{}
	for k, v := range parseText(t, o.String()) {
		got[canonical(k)] = v
	}
	if v, ok := got[`node_rapl_package_joules_total{index="1",path="/sys/class/powercap/intel-rapl:1"}`]; !ok || v != 5 {
		t.Errorf("readable zone: %v, %v; want 5 J\n%s", v, ok, o.String())
	}
	if _, ok := got[`node_rapl_package_joules_total{index="0",path="/sys/class/powercap/intel-rapl:0"}`]; ok {
		t.Errorf("the unreadable zone was exported:\n%s", o.String())
	}
	if got["vigil_power_unreadable_zones"] != 1 {
		t.Errorf("vigil_power_unreadable_zones = %v, want 1", got["vigil_power_unreadable_zones"])
	}
	if n := strings.Count(e.String(), "readable by root only"); n != 1 || !strings.Contains(e.String(), "intel-rapl:0") {
		t.Errorf("want one warning naming intel-rapl:0, got %d in:\n%s", n, e.String())
	}
}
