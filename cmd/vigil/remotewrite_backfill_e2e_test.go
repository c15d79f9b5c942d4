package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// vmPeer is a VictoriaMetrics that a test stops and starts again on the
// same address and data.
type vmPeer struct {
	bin, addr, data string
	cmd             *exec.Cmd
	out             *testutil.SyncBuffer
	done            chan struct{}
}

func (v *vmPeer) start(t *testing.T) {
	t.Helper()
	v.cmd = exec.Command(v.bin, "-storageDataPath="+v.data, "-httpListenAddr="+v.addr,
		"-search.latencyOffset=0s", "-search.disableCache", "-retentionPeriod=1", "-loggerLevel=WARN")
	v.out = &testutil.SyncBuffer{}
	v.cmd.Stdout, v.cmd.Stderr = v.out, v.out
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("start victoria-metrics: %v", err)
	}
	v.done = make(chan struct{})
	go func(c *exec.Cmd, d chan struct{}) { _ = c.Wait(); close(d) }(v.cmd, v.done)
	waitUntil(t, "victoria-metrics /health", 30*time.Second, func() bool { return get("http://"+v.addr+"/health") == nil })
}

// stop ends it cleanly (SIGINT flushes its buffers).
func (v *vmPeer) stop(t *testing.T) {
	t.Helper()
	if v.cmd == nil {
		return
	}
	_ = v.cmd.Process.Signal(os.Interrupt)
	select {
	case <-v.done:
	case <-time.After(15 * time.Second):
		_ = v.cmd.Process.Kill()
		<-v.done
	}
	if t.Failed() {
		t.Logf("victoria-metrics output (tail):\n%s", tail(v.out.String(), 2000))
	}
	v.cmd = nil
}

// TestE2ERemoteWriteBackfill: the destination (a real VictoriaMetrics) is
// stopped for 8 s while simulated nodes stream into the server, whose
// remote-write queue holds under two seconds of them. The series behind
// are read back from the store once it returns, and then the server is
// stopped while the destination is down and started again. In the end
// VictoriaMetrics has every sample Vigil stored over the whole run, with
// the same values, and nothing was counted dropped.
func TestE2ERemoteWriteBackfill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	vm := &vmPeer{bin: testutil.LookPeer(t, "victoria-metrics", "apt-get install victoria-metrics"),
		addr: freePort(t), data: t.TempDir()}
	vm.start(t)
	t.Cleanup(func() { vm.stop(t) })
	vmURL := "http://" + vm.addr

	dir := t.TempDir()
	cfg := filepath.Join(dir, "vigil.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\nremote_write = [{ url = %q, queue_capacity = 1500, "+
		"max_samples_per_send = 500, max_backoff = \"300ms\", batch_send_deadline = \"200ms\" }]\n", vmURL+"/api/v1/write")), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr, wireAddr, data := freePort(t), freePort(t), filepath.Join(dir, "data")
	base := "http://" + httpAddr
	serverArgs := []string{"server", "--config", cfg, "--http", httpAddr, "--listen", wireAddr, "--data", data,
		"--interval", "1s", "--disable-rollups"}
	srv := start(t, "server", serverArgs...)
	waitUntil(t, "the server", 15*time.Second, func() bool { return get(base+"/-/ready") == nil })
	const nodes = 6
	start(t, "simulate", "simulate", "--nodes", fmt.Sprint(nodes), "--cpus", "2", "--upstream", wireAddr,
		"--outages=false", "--group-size", "3")
	t0 := time.Now()
	waitUntil(t, "5 ticks of every node", 30*time.Second, func() bool {
		n, err := promScalar(base, `count(count_over_time(node_load1[1m]) >= 5)`)
		return err == nil && n == nodes
	})

	// An outage of the destination.
	vm.stop(t)
	time.Sleep(8 * time.Second)
	st := remoteWriteStatusFull(t, base)
	if st.Deferred == 0 || st.BackfillSeries == 0 {
		t.Fatalf("after 8 s without the destination: %+v, want samples deferred to the store", st)
	}
	t.Logf("outage: %d samples deferred, %d series behind", st.Deferred, st.BackfillSeries)
	vm.start(t)
	waitUntil(t, "the backfill to catch up", 60*time.Second, func() bool {
		s := remoteWriteStatusFull(t, base)
		return s.BackfillSeries == 0 && s.Backfilled > 0
	})
	st = remoteWriteStatusFull(t, base)
	t.Logf("caught up: %d deferred, %d read back from the store", st.Deferred, st.Backfilled)

	// A stop of the server while the destination is down: what is behind
	// or queued is kept in the data directory and sent after the start.
	vm.stop(t)
	time.Sleep(3 * time.Second)
	srv.stop(t)
	if m, _ := filepath.Glob(filepath.Join(data, "remote_write", "pending-*")); len(m) != 1 {
		t.Fatalf("pending files after the stop: %v", m)
	}
	vm.start(t)
	start(t, "server", serverArgs...)
	waitUntil(t, "the server again", 15*time.Second, func() bool { return get(base+"/-/ready") == nil })
	waitUntil(t, "the restarted server's backfill", 60*time.Second, func() bool {
		s := remoteWriteStatusFull(t, base)
		return s.BackfillSeries == 0 && s.Backfilled > 0
	})
	time.Sleep(2 * time.Second)

	// Everything Vigil stored from the first tick to a few seconds ago.
	end := time.Now().Truncate(time.Second).Add(-3 * time.Second)
	at := end.Add(500 * time.Millisecond)
	window := at.Sub(t0.Add(-2 * time.Second)).Truncate(time.Second)
	const all = `{job=~"node|vigil"}`
	want := vigilRaw(t, base, all, window, at)
	samples := 0
	for _, s := range want {
		samples += len(s)
	}
	var diff []string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		_ = get(vmURL + "/internal/force_flush")
		got := vmExport(t, vmURL, all, at.Add(-window), at)
		diff, _, _ = compareRaw(want, got)
		if len(diff) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(diff) > 0 {
		t.Fatalf("victoria-metrics differs from vigil on %d of %d series (%d samples over %s); first:\n%s",
			len(diff), len(want), samples, window, strings.Join(diff[:min(10, len(diff))], "\n"))
	}
	st = remoteWriteStatusFull(t, base)
	if st.DroppedFull+st.DroppedRejected+st.DroppedShutdown != 0 {
		t.Errorf("samples dropped: %+v", st)
	}
	t.Logf("%d series, %d samples over %s identical in VictoriaMetrics; after the restart %d read back from the store",
		len(want), samples, window, st.Backfilled)
}

type rwBackfillStatus struct {
	rwStatus
	Deferred       uint64 `json:"samples_deferred"`
	Backfilled     uint64 `json:"samples_backfilled"`
	BackfillSeries int    `json:"backfill_series"`
}

func remoteWriteStatusFull(t *testing.T, base string) rwBackfillStatus {
	t.Helper()
	var r struct {
		Data struct {
			Destinations []rwBackfillStatus `json:"destinations"`
		} `json:"data"`
	}
	resp, err := http.Get(base + "/api/v1/status/remote_write")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil || len(r.Data.Destinations) != 1 {
		t.Fatalf("remote write status: %v %+v", err, r)
	}
	return r.Data.Destinations[0]
}
