// Command servermem compares the memory of `vigil server` with Prometheus
// holding the same series: `vigil simulate --nodes N` streams into
// `vigil server --remote-write`, which forwards every sample to Debian's
// Prometheus (--web.enable-remote-write-receiver), each with a private data
// directory and loopback ports.
//
//	go run ./bench/servermem --nodes 512 --duration 5m [--profile DIR] [--demo]
//
// Every --every it prints both processes' RSS (and anonymous RSS) with the
// head series each reports on /metrics. --profile DIR saves the server's
// heap profile (inuse and alloc, `go tool pprof -top`) at the end; --demo
// then measures `vigil demo --nodes N` alone the same way.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bench/internal/benchutil"
)

type options struct {
	vigil, prometheus string
	nodes             int
	duration, every   time.Duration
	profile           string
	demo, onlyDemo    bool
	walkthrough       bool
	noProm            bool
	serverArgs        string
	rwBatch, rwQueue  int
}

func main() {
	var o options
	flag.StringVar(&o.vigil, "vigil", "bin/vigil", "vigil binary")
	flag.StringVar(&o.prometheus, "prometheus", "/usr/bin/prometheus", "Prometheus binary (2.x, with --web.enable-remote-write-receiver)")
	flag.IntVar(&o.nodes, "nodes", 512, "simulated nodes (about 320 series each)")
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "how long to measure each setup")
	flag.DurationVar(&o.every, "every", 10*time.Second, "sampling period of RSS")
	flag.StringVar(&o.profile, "profile", "", "save heap profiles of the server (and demo) into this directory at the end (needs --debug-pprof, so a Vigil of issue 12 or later)")
	flag.BoolVar(&o.demo, "demo", false, "also measure `vigil demo --nodes N` alone")
	flag.BoolVar(&o.onlyDemo, "only-demo", false, "measure `vigil demo` only")
	flag.BoolVar(&o.walkthrough, "walkthrough", false, "while measuring the demo, keep a dashboard live stream open and run the node and explore views' range queries every 10s")
	flag.BoolVar(&o.noProm, "no-prometheus", false, "run the server without remote write to Prometheus")
	flag.StringVar(&o.serverArgs, "server-args", "", "more flags for vigil server, space-separated (e.g. \"--disable-rollups\")")
	flag.IntVar(&o.rwBatch, "rw-batch", 20000, "max_samples_per_send of the server's remote write (one sender: 2000 a request does not keep up with 165,000 samples/s)")
	flag.IntVar(&o.rwQueue, "rw-queue", 100000, "queue_capacity of the server's remote write")
	flag.Parse()
	if o.nodes <= 0 || o.nodes > 100_000 || o.duration <= 0 || o.duration > 2*time.Hour || o.every < time.Second {
		fmt.Fprintln(os.Stderr, "servermem: want 0 < --nodes <= 100000, 0 < --duration <= 2h, --every >= 1s")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if !o.onlyDemo {
		err = runServer(ctx, o)
	}
	if err == nil && (o.demo || o.onlyDemo) {
		err = runDemo(ctx, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "servermem:", err)
		os.Exit(1)
	}
}

func runServer(ctx context.Context, o options) error {
	bin, err := filepath.Abs(o.vigil)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "servermem-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop()
		}
	}()
	var prom *child
	promHTTP := ""
	if !o.noProm {
		if _, err := exec.LookPath(o.prometheus); err != nil {
			return fmt.Errorf("no Prometheus at %s (apt-get install prometheus, or --no-prometheus): %w", o.prometheus, err)
		}
		if promHTTP, err = benchutil.FreeAddr(); err != nil {
			return err
		}
		cfg := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(cfg, []byte("global: {}\n"), 0o644); err != nil {
			return err
		}
		if prom, err = start(o.prometheus, "prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "prom"),
			"--web.listen-address="+promHTTP, "--web.enable-remote-write-receiver"); err != nil {
			return err
		}
		children = append(children, prom)
		if err := waitHTTP(ctx, promHTTP, "/-/ready"); err != nil {
			return fmt.Errorf("prometheus: %w\n%s", err, prom.out.String())
		}
	}
	httpAddr, err := benchutil.FreeAddr()
	if err != nil {
		return err
	}
	wireAddr, err := benchutil.FreeAddr()
	if err != nil {
		return err
	}
	args := []string{"server", "--http", httpAddr, "--listen", wireAddr, "--data", filepath.Join(dir, "vigil"),
		"--log-level", "warn"}
	if o.profile != "" {
		args = append(args, "--debug-pprof")
	}
	args = append(args, strings.Fields(o.serverArgs)...)
	if prom != nil {
		cfg := filepath.Join(dir, "vigil.toml")
		toml := fmt.Sprintf("[server]\nremote_write = [{url = %q, max_samples_per_send = %d, queue_capacity = %d}]\n",
			"http://"+promHTTP+"/api/v1/write", o.rwBatch, o.rwQueue)
		if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
			return err
		}
		args = append(args, "--config", cfg)
	}
	srv, err := start(bin, "vigil server", args...)
	if err != nil {
		return err
	}
	children = append(children, srv)
	if err := waitHTTP(ctx, httpAddr, "/-/ready"); err != nil {
		return fmt.Errorf("vigil server: %w\n%s", err, srv.out.String())
	}
	sim, err := start(bin, "vigil simulate", "simulate", "--nodes", strconv.Itoa(o.nodes), "--upstream", wireAddr, "--log-level", "warn")
	if err != nil {
		return err
	}
	children = append(children, sim)

	fmt.Printf("vigil server --remote-write into Prometheus, %d simulated nodes, %s\n\n", o.nodes, o.duration)
	fmt.Printf("%8s %12s %12s %12s %12s %12s %12s\n", "time", "vigil MB", "vigil anon", "vigil series", "prom MB", "prom anon", "prom series")
	t0 := time.Now()
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	for time.Since(t0) < o.duration {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if sim.exited() {
			return fmt.Errorf("vigil simulate exited:\n%s", sim.out.String())
		}
		vr, va := rss(srv.pid())
		vs := metric(httpAddr, "prometheus_tsdb_head_series")
		line := fmt.Sprintf("%8s %12.0f %12.0f %12.0f", time.Since(t0).Round(time.Second), vr, va, vs)
		if prom != nil {
			pr, pa := rss(prom.pid())
			line += fmt.Sprintf(" %12.0f %12.0f %12.0f", pr, pa, metric(promHTTP, "prometheus_tsdb_head_series"))
		}
		fmt.Println(line)
	}
	fmt.Printf("\nvigil samples appended %.0f, prometheus %.0f\n",
		metric(httpAddr, "prometheus_tsdb_head_samples_appended_total"), metric(promHTTP, "prometheus_tsdb_head_samples_appended_total"))
	if prom != nil {
		fmt.Printf("vigil remote write: %s\n", get(httpAddr, "/api/v1/status/remote_write"))
	}
	if o.profile != "" {
		return saveProfiles(o.profile, "server", httpAddr)
	}
	return nil
}

func runDemo(ctx context.Context, o options) error {
	bin, err := filepath.Abs(o.vigil)
	if err != nil {
		return err
	}
	httpAddr, err := benchutil.FreeAddr()
	if err != nil {
		return err
	}
	args := []string{"demo", "--nodes", strconv.Itoa(o.nodes), "--http", httpAddr}
	if o.profile != "" {
		args = append(args, "--debug-pprof")
	}
	demo, err := start(bin, "vigil demo", args...)
	if err != nil {
		return err
	}
	defer demo.stop()
	if err := waitHTTP(ctx, httpAddr, "/-/ready"); err != nil {
		return fmt.Errorf("vigil demo: %w\n%s", err, demo.out.String())
	}
	if o.walkthrough {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go walk(wctx, httpAddr, o.every)
	}
	fmt.Printf("\nvigil demo --nodes %d, %s (walkthrough: %v)\n\n%8s %12s %12s %12s\n", o.nodes, o.duration, o.walkthrough, "time", "demo MB", "demo anon", "series")
	t0 := time.Now()
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	for time.Since(t0) < o.duration {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if demo.exited() {
			return fmt.Errorf("vigil demo exited:\n%s", demo.out.String())
		}
		r, a := rss(demo.pid())
		fmt.Printf("%8s %12.0f %12.0f %12.0f\n", time.Since(t0).Round(time.Second), r, a, metric(httpAddr, "prometheus_tsdb_head_series"))
	}
	if o.profile != "" {
		return saveProfiles(o.profile, "demo", httpAddr)
	}
	return nil
}

// The dashboard's heatmap preset and the range queries of its node and
// explore views.
const (
	liveExpr = `1 - avg by (node)(rate(node_cpu_seconds_total{mode="idle"}[30s]))`
)

var walkQueries = []string{
	liveExpr,
	`node_load1`,
	`sum by (node)(rate(node_network_receive_bytes_total{device!="lo"}[30s]))`,
	`rate(node_cpu_seconds_total{node="cn00001"}[30s])`,
}

// walk does what a user clicking through the dashboard does: one live
// stream open all along, and range queries over the last 5 minutes.
func walk(ctx context.Context, addr string, every time.Duration) {
	go func() {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/web/live?expr="+url.QueryEscape(liveExpr), nil)
		if err != nil {
			return
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	c := http.Client{Timeout: time.Minute}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		end := time.Now()
		for _, q := range walkQueries {
			v := url.Values{"query": {q}, "start": {strconv.FormatInt(end.Add(-5*time.Minute).Unix(), 10)},
				"end": {strconv.FormatInt(end.Unix(), 10)}, "step": {"2"}}
			if resp, err := c.Get("http://" + addr + "/api/v1/query_range?" + v.Encode()); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// saveProfiles fetches the heap profile and prints its top consumers by
// in-use and allocated bytes.
func saveProfiles(dir, name, addr string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(dir, name+".heap.pb.gz")
	if err := fetch("http://"+addr+"/debug/pprof/heap?gc=1", file); err != nil {
		return err
	}
	fmt.Printf("\nheap profile of %s in %s\n", name, file)
	for _, idx := range []string{"inuse_space", "alloc_space"} {
		out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", "-sample_index="+idx, file).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof: %w\n%s", err, out)
		}
		fmt.Printf("\n%s:\n%s", idx, out)
	}
	return nil
}

func fetch(url, file string) error {
	c := http.Client{Timeout: time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 256<<20)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// get returns the first 4 KiB of the answer to GET addr+path.
func get(addr, path string) string {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return strings.TrimSpace(string(b))
}

// rss returns VmRSS and RssAnon of pid in MB (0 when unreadable).
func rss(pid int) (total, anon float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			total = kb / 1024
		case "RssAnon:":
			anon = kb / 1024
		}
	}
	return total, anon
}

// metric returns the sum of the samples of name on addr's /metrics (0 when
// unreadable).
func metric(addr, name string) float64 {
	if addr == "" {
		return 0
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 64<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

type child struct {
	name string
	cmd  *exec.Cmd
	out  *benchutil.TailBuffer
	done chan struct{}
}

func start(bin, name string, args ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(bin, args...), out: &benchutil.TailBuffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop interrupts the child and kills it if it is not gone within 10s.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// waitHTTP polls addr+path until it answers 200, for up to a minute.
func waitHTTP(ctx context.Context, addr, path string) error {
	c := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := c.Get("http://" + addr + path); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("nothing answered on http://%s%s within a minute", addr, path)
}
