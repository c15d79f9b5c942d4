package main

import (
	"bytes"
	"context"
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
	var body string
	var neErr bytes.Buffer
	for attempt := 0; attempt < 3 && body == ""; attempt++ {
		addr := freePort(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		neErr.Reset()
		cmd := exec.CommandContext(ctx, ne, "--path.sysfs="+root+"/sys", "--path.procfs="+root+"/proc",
			"--collector.disable-defaults", "--collector.infiniband", "--collector.rapl", "--web.listen-address="+addr)
		cmd.Stderr = &neErr
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		for i := 0; i < 100 && body == ""; i++ {
			if b, err := scrape("http://" + addr + "/metrics"); err == nil {
				body = b
				break
			}
			select {
			case <-exited:
				i = 100
			case <-time.After(100 * time.Millisecond):
			}
		}
		cancel()
		<-exited
	}
	if body == "" {
		t.Fatalf("node_exporter did not answer; its stderr:\n%s", neErr.String())
	}
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
