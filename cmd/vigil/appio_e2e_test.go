package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
)

// appioRoot is a root with a mount table and this process in Slurm job 31.
func appioRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"proc/self/mountinfo": "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n30 22 0:40 / /scratch rw - lustre mds@o2ib:/scratch rw\n",
		filepath.Join("proc", fmt.Sprint(os.Getpid()), "cgroup"): "0::/system.slice/slurmstepd.scope/job_31/step_0/user/task_0\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestE2ESampleOnceAppio: with nothing connected, `vigil sample --once
// --plugins appio` prints only the plugin's own series, at once, and
// leaves no socket behind.
func TestE2ESampleOnceAppio(t *testing.T) {
	root := appioRoot(t)
	start := time.Now()
	out, errOut, code := run(t, "sample", "--once", "--root", root, "--plugins", "appio", "--node", "test")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if strings.Contains(out, "jobid") || !strings.Contains(out, `vigil_appio_connections{node="test"} 0`) {
		t.Errorf("output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(root, "run/vigil/appio.sock")); err == nil {
		t.Errorf("socket left behind")
	}
}

// TestE2ESamplerAppio: a client of the protocol reports 100,000 writes of
// 1 KiB to a file on /scratch; the running sampler serves them as its
// job's series.
func TestE2ESamplerAppio(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	root := appioRoot(t)
	addr := freePort(t)
	start(t, "sampler", "sampler", "--root", root, "--plugins", "appio", "--interval", "100ms", "--listen", addr, "--node", "e2e")
	sock := filepath.Join(root, "run/vigil/appio.sock")
	var c *net.UnixConn
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		if c, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no appio socket: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer c.Close()
	rec := appio.Record{FileID: 1}
	rec.C[appio.Writes], rec.C[appio.BytesWritten], rec.C[appio.WriteHist+1] = 100000, 102_400_000, 100000
	for _, m := range [][]byte{
		appio.AppendHello(nil, appio.Hello{Rank: -1, IntervalMS: 1000, Exe: "/bin/dd", Client: "e2e"}),
		appio.AppendFile(nil, appio.File{ID: 1, Path: "/scratch/x"}),
		appio.AppendInterval(nil, 1e18, 1e18+1e9, []appio.Record{rec}),
	} {
		if _, err := c.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]float64{
		`vigil_appio_bytes_total{node="e2e",jobid="31",mountpoint="/scratch",fstype="lustre",op="write"}`: 102_400_000,
		`vigil_appio_calls_total{node="e2e",jobid="31",mountpoint="/scratch",fstype="lustre",op="write"}`: 100000,
		`vigil_appio_processes{node="e2e",jobid="31"}`:                                                    1,
	}
	var got map[string]float64
	for time.Now().Before(deadline) {
		if b, err := scrape("http://" + addr + "/metrics"); err == nil {
			got = parseText(t, b)
			if got[`vigil_appio_records_total{node="e2e"}`] == 1 {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if t.Failed() {
		for k, v := range got {
			if strings.HasPrefix(k, "vigil_appio") {
				t.Logf("%s %v", k, v)
			}
		}
	}
}
