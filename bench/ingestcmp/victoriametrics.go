package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bench/internal/benchutil"
)

// vmProc is a VictoriaMetrics single-node server on a private data path.
type vmProc struct {
	cmd    *exec.Cmd
	addr   string
	dir    string
	stderr bytes.Buffer
}

func startVM(bin, dir string) (*vmProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := benchutil.FreeAddr()
	if err != nil {
		return nil, err
	}
	v := &vmProc{addr: addr, dir: dir}
	v.cmd = exec.Command(bin, "-storageDataPath="+dir, "-httpListenAddr="+addr, "-retentionPeriod=1", "-loggerLevel=ERROR")
	v.cmd.Stderr = &v.stderr
	if err := v.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return v, nil
			}
		}
		if time.Now().After(deadline) {
			v.stop()
			return nil, fmt.Errorf("victoria-metrics not ready after 30s: %s", v.stderr.String())
		}
	}
}

// stop ends VictoriaMetrics as its operators do (SIGINT), which flushes
// what it holds in memory to parts on disk.
func (v *vmProc) stop() {
	_ = v.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = v.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = v.cmd.Process.Kill()
		<-done
	}
}

// metric sums the samples of name on VictoriaMetrics' /metrics whose
// line contains sel (e.g. `type="promremotewrite"`; empty: all).
func (v *vmProc) metric(name, sel string) (float64, error) {
	resp, err := http.Get("http://" + v.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") || !strings.Contains(line, sel) {
			continue
		}
		f := strings.Fields(line)
		x, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("victoria-metrics metrics: %q: %w", line, err)
		}
		sum += x
	}
	return sum, nil
}

func (v *vmProc) get(path string) error {
	resp, err := http.Get("http://" + v.addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return nil
}

// post sends every worker's prepared requests concurrently and returns the
// wall time and the failed requests.
func (v *vmProc) post(o options, reqs [][][]byte) (time.Duration, int64) {
	url := "http://" + v.addr + "/api/v1/write"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.workers}}
	var failed atomic.Int64
	start := time.Now()
	_ = byWorker(len(reqs), len(reqs), func(w int, _ []int) error {
		for _, body := range reqs[w] {
			if err := postWrite(client, url, body); err != nil && failed.Add(1) == 1 {
				fmt.Println("first remote-write error:", err)
			}
		}
		return nil
	})
	return time.Since(start), failed.Load()
}

// waitRows waits until VictoriaMetrics counts n rows received by remote
// write (it answers before its in-memory buffers reach the storage).
func (v *vmProc) waitRows(n int) (float64, error) {
	var got float64
	var err error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, err = v.metric("vm_rows_added_to_storage_total", ""); err == nil && got >= float64(n) {
			return got, nil
		}
	}
	return got, err
}

// ingestVM feeds the same prepared remote-write requests as Prometheus gets
// to VictoriaMetrics and reports its rate, CPU and memory beside vigil's.
func ingestVM(o options, d *dataset, reqs [][][]byte, dir string, vigilRate float64, vigilCPU time.Duration) error {
	v, err := startVM(o.victoriaMetrics, dir)
	if err != nil {
		return err
	}
	defer v.stop()
	cpu0, perr := procCPU(v.cmd.Process.Pid)
	t0 := time.Now()
	answered, failed := v.post(o, reqs)
	// It answers once rows are buffered, before they reach the storage;
	// the time runs until they have.
	stored, werr := v.waitRows(d.total)
	dur := time.Since(t0)
	cpu1, perr1 := procCPU(v.cmd.Process.Pid)
	if werr != nil {
		return werr
	}
	rate := float64(d.total) / dur.Seconds()
	fmt.Printf("victoria-metrics remote write: %8.0f samples/s  (%s until stored, last answer after %s, %d failed requests, %.0f of %d rows added to storage)\n",
		rate, dur.Round(time.Millisecond), answered.Round(time.Millisecond), failed, stored, d.total)
	if perr == nil && perr1 == nil {
		c := (cpu1 - cpu0).Seconds()
		fmt.Printf("victoria-metrics CPU: %.1f CPU-s (%.0f samples per CPU-s)\n", c, float64(d.total)/c)
		fmt.Printf("ratio vigil/victoria-metrics: %7.1fx wall, %.1fx per CPU-s of the receiving process\n", vigilRate/rate, c/vigilCPU.Seconds())
	}
	printRSS("victoria-metrics", v.cmd.Process.Pid)
	return nil
}

// bytesVM stores the bytes phase's dataset in VictoriaMetrics by remote
// write, merges its parts (as it would in the background over time), stops
// it and measures its data and index directories per sample.
func bytesVM(o options, d *dataset, dir string) error {
	reqs, err := encodeRequests(d, o)
	if err != nil {
		return err
	}
	v, err := startVM(o.victoriaMetrics, dir)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			v.stop()
		}
	}()
	if _, failed := v.post(o, reqs); failed > 0 {
		return fmt.Errorf("%d remote-write requests failed", failed)
	}
	if _, err := v.waitRows(d.total); err != nil {
		return err
	}
	if err := v.get("/internal/force_flush"); err != nil {
		return err
	}
	// Merge every partition the data touched into as few parts as
	// VictoriaMetrics makes; it merges in the background, so wait until
	// no merge has run for a while.
	for _, t := range []time.Time{d.t0, d.time(len(d.ticks) - 1)} {
		if err := v.get("/internal/force_merge?partition_prefix=" + t.UTC().Format("2006_01")); err != nil {
			return err
		}
	}
	quiet := 0
	for deadline := time.Now().Add(3 * time.Minute); quiet < 5 && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		active, err := v.metric("vm_active_merges", "")
		if err != nil {
			return err
		}
		if active == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	rows, _ := v.metric("vm_rows", `type="storage/`)
	parts, _ := v.metric("vm_parts", `type="storage/`)
	v.stop()
	stopped = true
	data, err := dirSize(filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	index, err := dirSize(filepath.Join(dir, "indexdb"))
	if err != nil {
		return err
	}
	fmt.Printf("-- peer, VictoriaMetrics (remote write, parts merged, stopped): %d samples sent, %.0f rows in %.0f parts\n", d.total, rows, parts)
	fmt.Printf("bytes/sample: data directory %.3f, with indexdb %.3f\n", float64(data)/float64(d.total), float64(data+index)/float64(d.total))
	return nil
}

// printRSS prints the resident and peak resident memory of pid.
func printRSS(who string, pid int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return
	}
	var rss, hwm string
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	fmt.Printf("%s memory: RSS %s, peak RSS %s\n", who, rss, hwm)
}
