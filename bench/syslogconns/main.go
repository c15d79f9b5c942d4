// Command syslogconns measures what TCP syslog connections that hold an
// unfinished line cost the intake, and what its caps and timeouts do with
// them: it starts the log service in this process on a temporary
// directory, opens N connections from 127.0.0.x source addresses, writes
// an unfinished line on each, and reports the Go heap and the process RSS
// before and after, how many connections the caps refused, and how long
// the frame timeout takes to close the rest. Loopback only; bounded by
// -n and -wait.
//
//	go run ./bench/syslogconns -n 3000 -line 1000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/logs/logsvc"
	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "syslogconns:", err)
		os.Exit(1)
	}
}

func run() error {
	n := flag.Int("n", 3000, "connections to open")
	line := flag.Int("line", 1000, "bytes of the unfinished line each connection sends")
	hosts := flag.Int("hosts", 100, "source addresses 127.0.0.1.. to spread the connections over")
	maxConns := flag.Int("max-conns", 0, "listener cap (0: default 4096)")
	perHost := flag.Int("max-conns-per-host", 0, "per-source cap (0: default 64)")
	frameTimeout := flag.Duration("frame-timeout", 0, "frame timeout (0: default 30s)")
	wait := flag.Duration("wait", 60*time.Second, "longest wait for the server to close the connections")
	flag.Parse()
	if *n <= 0 || *n > 20000 || *hosts <= 0 || *hosts > 250 {
		return errors.New("-n must be 1..20000 and -hosts 1..250")
	}
	dir, err := os.MkdirTemp("", "syslogconns")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	reg := prometheus.NewRegistry()
	svc, err := logsvc.New(logsvc.Config{TCPAddr: "127.0.0.1:0", DataDir: dir, Registerer: reg,
		Limits: syslog.Limits{MaxConns: *maxConns, MaxConnsPerHost: *perHost, FrameTimeout: *frameTimeout}}, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	_, addr, _ := svc.Addrs()

	heap0, rss0 := heapAlloc(), rss()
	msg := []byte("<13>Jan  5 10:00:00 cn01 app: " + strings.Repeat("u", max(*line-30, 1)))
	conns := make([]net.Conn, 0, *n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for i := range *n {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+i%*hosts))}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr.String())
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		conns = append(conns, c)
		if _, err := c.Write(msg); err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
	}
	open := func() float64 { return sum(reg, "vigil_syslog_connections") }
	// Wait until the server settled: every connection admitted or refused.
	deadline := time.Now().Add(*wait)
	for open()+refused(reg) < float64(*n) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let the admitted ones read their line
	heap1, rss1 := heapAlloc(), rss()
	admitted := open()
	fmt.Printf("connections: %d opened, %.0f admitted, %.0f refused by the caps\n", *n, admitted, refused(reg))
	fmt.Printf("Go heap: %.1f MiB -> %.1f MiB (%.1f KiB per admitted connection; client sockets in this process included)\n",
		mib(heap0), mib(heap1), float64(int64(heap1)-int64(heap0))/1024/max(admitted, 1))
	fmt.Printf("RSS: %.1f MiB -> %.1f MiB\n", mib(rss0), mib(rss1))
	for open() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("all closed by the server %.1fs after the first connection (%.0f still open)\n", time.Since(start).Seconds(), open())
	return nil
}

// sum adds up the values of a gathered metric family.
func sum(reg *prometheus.Registry, name string) float64 {
	var v float64
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return v
}

func refused(reg *prometheus.Registry) float64 {
	return sum(reg, "vigil_syslog_connections_refused_total")
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rss reads VmRSS from /proc/self/status (Linux), in bytes.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
