// Command samplercost measures, side by side in one run, the CPU time and
// memory the vigil node sampler spends per tick and what Debian's
// prometheus-node-exporter spends per scrape for the same collectors.
//
//	go run ./bench/samplercost --vigil bin/vigil-sampler --duration 30s
//
// CPU time comes from /proc/<pid>/schedstat (nanoseconds on CPU), so the
// figures are not limited to clock-tick resolution.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

func main() {
	var (
		vigilBin = flag.String("vigil", "bin/vigil-sampler", "vigil sampler binary")
		neBin    = flag.String("node-exporter", "/usr/bin/prometheus-node-exporter", "node_exporter binary (empty to skip)")
		duration = flag.Duration("duration", 30*time.Second, "measurement time per run")
		interval = flag.Duration("interval", 100*time.Millisecond, "sampling and scrape interval")
		plugins  = flag.String("plugins", "cpu,memory,vmstat,load,netdev,diskstats,filesystem,self", "vigil plugins")
		root     = flag.String("root", "/", "root of /proc and /sys for both")
	)
	flag.Parse()
	if err := run(*vigilBin, *neBin, *plugins, *root, *duration, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "samplercost:", err)
		os.Exit(1)
	}
}

type result struct {
	name     string
	cpu      time.Duration
	rounds   int
	values   int
	rssBytes int64
}

func run(vigilBin, neBin, plugins, root string, d, iv time.Duration) error {
	var res []result
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	v, err := measure("vigil sampler", d, iv, addr, false,
		vigilBin, "--interval", iv.String(), "--plugins", plugins, "--root", root, "--listen", addr, "--log-level", "warn")
	if err != nil {
		return err
	}
	res = append(res, v)
	if neBin != "" {
		addr, _ := freeAddr()
		collectors := []string{"--collector.disable-defaults", "--collector.cpu", "--collector.meminfo", "--collector.vmstat",
			"--collector.loadavg", "--collector.netdev", "--collector.diskstats", "--collector.filesystem", "--collector.stat",
			"--path.procfs=" + strings.TrimSuffix(root, "/") + "/proc", "--path.sysfs=" + strings.TrimSuffix(root, "/") + "/sys",
			"--web.listen-address=" + addr, "--log.level=warn"}
		n, err := measure("prometheus-node-exporter", d, iv, addr, true, neBin, collectors...)
		if err != nil {
			return err
		}
		res = append(res, n)
	}
	fmt.Printf("interval %s, %s per run\n\n", iv, d)
	fmt.Println("| daemon | values | rounds | CPU per round | % of one core | RSS |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range res {
		per := time.Duration(int64(r.cpu) / int64(max(r.rounds, 1)))
		fmt.Printf("| %s | %d | %d | %.1f µs | %.3f %% | %.1f MiB |\n", r.name, r.values, r.rounds,
			float64(per)/1e3, 100*float64(r.cpu)/float64(d), float64(r.rssBytes)/(1<<20))
	}
	if len(res) == 2 {
		a := float64(res[0].cpu) / float64(max(res[0].rounds, 1))
		b := float64(res[1].cpu) / float64(max(res[1].rounds, 1))
		fmt.Printf("\nvigil CPU per tick / node_exporter CPU per scrape = %.3f\n", a/b)
	}
	return nil
}

// measure starts the daemon, waits for /metrics, and measures its CPU over
// d. With scrape, rounds are scrapes made by us every iv; otherwise rounds
// are the sampler's own ticks.
func measure(name string, d, iv time.Duration, addr string, scrapeRounds bool, bin string, args ...string) (result, error) {
	r := result{name: name}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("start %s: %w", bin, err)
	}
	defer cmd.Wait()
	defer cancel()
	url := "http://" + addr + "/metrics"
	var body string
	for i := 0; i < 100; i++ {
		if b, err := get(url); err == nil && len(b) > 0 {
			body = b
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if body == "" {
		return r, fmt.Errorf("%s: no /metrics at %s", name, url)
	}
	time.Sleep(time.Second) // warm up
	pid := cmd.Process.Pid
	c0, err := cpuNanos(pid)
	if err != nil {
		return r, err
	}
	start := time.Now()
	if scrapeRounds {
		t := time.NewTicker(iv)
		for time.Since(start) < d {
			<-t.C
			if _, err := get(url); err != nil {
				return r, err
			}
			r.rounds++
		}
		t.Stop()
	} else {
		time.Sleep(d)
	}
	elapsed := time.Since(start)
	c1, err := cpuNanos(pid)
	if err != nil {
		return r, err
	}
	r.cpu = time.Duration(float64(c1-c0) * float64(d) / float64(elapsed))
	if !scrapeRounds {
		r.rounds = int(d / iv)
	}
	r.rssBytes, _ = rss(pid)
	if b, err := get(url); err == nil {
		r.values = countValues(b)
	}
	return r, nil
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// countValues counts samples excluding the exporters' own Go runtime metrics.
func countValues(body string) int {
	n := 0
	for _, l := range strings.Split(body, "\n") {
		if l == "" || l[0] == '#' || strings.HasPrefix(l, "go_") || strings.HasPrefix(l, "process_") ||
			strings.HasPrefix(l, "promhttp_") || strings.HasPrefix(l, "node_scrape_") || strings.HasPrefix(l, "vigil_") {
			continue
		}
		n++
	}
	return n
}

func cpuNanos(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("empty schedstat")
	}
	// schedstat is per thread for the main thread only in /proc/pid; sum all tasks.
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return strconv.ParseInt(f[0], 10, 64)
	}
	var total int64
	for _, e := range entries {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, e.Name()))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			total += v
		}
	}
	return total, nil
}

func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			v, _ := strconv.ParseInt(f[1], 10, 64)
			return v * 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
