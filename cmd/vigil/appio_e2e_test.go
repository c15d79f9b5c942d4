package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/testutil/slurm"
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

// appioClient is a client of the appio protocol written apart from the Go
// encoder: it claims a job id of its own in HELLO (the sampler must take
// the job from the cgroup), reports 100,000 writes of 1 KiB to a file and
// stays connected until a file appears.
const appioClient = `import os, socket, struct, sys, time
sock, out, done = sys.argv[1:4]
def msg(t, payload):
    return struct.pack("<4sHHI", b"VIO1", 1, t, len(payload)) + payload
def s(v):
    b = v.encode()
    return struct.pack("<H", len(b)) + b
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(sock)
c.send(msg(1, struct.pack("<iI", 0, 1000) + s(sys.executable) + s("999999") + s("python client")))
c.send(msg(2, struct.pack("<III", 1, 0, 0) + s(out)))
counters = [0] * 36
counters[3], counters[5], counters[16 + 10 + 1] = 100000, 102400000, 100000
now = time.time_ns()
c.send(msg(3, struct.pack("<QQI", now - now % 10**9, now - now % 10**9 + 10**9, 1) + struct.pack("<II36Q", 1, 0, *counters)))
deadline = time.time() + 60
while not os.path.exists(done) and time.time() < deadline:
    time.sleep(0.05)
c.send(msg(4, b""))
`

// TestE2ESlurmAppio: a process of a real Slurm job (cgroup v1) reports
// its I/O to a running sampler, which attributes it to the job from the
// process's cgroup, with the exact counts, and counts the process as
// connected until it leaves.
func TestE2ESlurmAppio(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	py := findPython(t)
	c := slurm.Start(t, slurm.Options{Nodes: 1})
	sock := filepath.Join(c.Dir, "appio.sock")
	cfg := filepath.Join(c.Dir, "vigil.toml")
	if err := os.WriteFile(cfg, []byte("[plugins.appio]\nsocket = \""+sock+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	start(t, "sampler", "sampler", "--config", cfg, "--root", "/", "--plugins", "appio", "--interval", "200ms", "--listen", addr, "--node", "appiotest")
	waitFor(t, 15*time.Second, "the appio socket", func() bool { _, err := os.Stat(sock); return err == nil })

	script := filepath.Join(c.Dir, "client.py")
	if err := os.WriteFile(script, []byte(appioClient), 0o644); err != nil {
		t.Fatal(err)
	}
	out, done := filepath.Join(c.Dir, "out.dat"), filepath.Join(c.Dir, "done")
	id := c.Submit(t, "-N1", "-n1", "-c1", "--mem=100M", "--wrap", fmt.Sprintf("exec %s %s %s %s %s", py, script, sock, out, done))
	c.WaitJob(t, id, 15*time.Second, "RUNNING")

	value := func(name, op string) (float64, bool) {
		b, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			return 0, false
		}
		for _, line := range strings.Split(b, "\n") {
			if strings.HasPrefix(line, name+"{") && strings.Contains(line, `jobid="`+id+`"`) && strings.Contains(line, op) {
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	waitFor(t, 20*time.Second, "the job's written bytes", func() bool {
		v, _ := value("vigil_appio_bytes_total", `op="write"`)
		return v == 102_400_000
	})
	if v, _ := value("vigil_appio_calls_total", `op="write"`); v != 100000 {
		t.Errorf("writes = %v, want 100000", v)
	}
	if v, _ := value("vigil_appio_access_size_total", `op="write",le="1024"`); v != 100000 {
		t.Errorf("writes of at most 1 KiB = %v, want 100000", v)
	}
	if v, ok := value("vigil_appio_processes", ""); !ok || v != 1 {
		t.Errorf("processes of job %s = %v (%v), want 1", id, v, ok)
	}
	if b, _ := scrape("http://" + addr + "/metrics"); strings.Contains(b, `jobid="999999"`) {
		t.Errorf("the HELLO's job id was taken over the cgroup's")
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the process to leave", func() bool {
		v, ok := value("vigil_appio_processes", "")
		return ok && v == 0
	})
}
