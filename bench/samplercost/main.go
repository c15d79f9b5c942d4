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
	// Both daemons run at the same time and are measured over the same
	// window, so load from elsewhere on the machine hits both alike.
	vaddr, err := freeAddr()
	if err != nil {
		return err
	}
	daemons := []*daemon{{name: "vigil sampler", addr: vaddr, bin: vigilBin,
		args: []string{"--interval", iv.String(), "--plugins", plugins, "--root", root, "--listen", vaddr, "--log-level", "warn"}}}
	if neBin != "" {
		naddr, _ := freeAddr()
		daemons = append(daemons, &daemon{name: "prometheus-node-exporter", addr: naddr, bin: neBin, scraped: true,
			args: []string{"--collector.disable-defaults", "--collector.cpu", "--collector.meminfo", "--collector.vmstat",
				"--collector.loadavg", "--collector.netdev", "--collector.diskstats", "--collector.filesystem", "--collector.stat",
				"--path.procfs=" + strings.TrimSuffix(root, "/") + "/proc", "--path.sysfs=" + strings.TrimSuffix(root, "/") + "/sys",
				"--web.listen-address=" + naddr, "--log.level=warn"}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, dm := range daemons {
		if err := dm.start(ctx); err != nil {
			return err
		}
		defer dm.cmd.Wait()
	}
	defer cancel()
	time.Sleep(time.Second) // warm up
	for _, dm := range daemons {
		if dm.c0, err = cpuNanos(dm.cmd.Process.Pid); err != nil {
			return err
		}
	}
	start := time.Now()
	t := time.NewTicker(iv)
	rounds := 0
	for time.Since(start) < d {
		<-t.C
		for _, dm := range daemons {
			if dm.scraped {
				if _, err := get("http://" + dm.addr + "/metrics"); err != nil {
					return err
				}
			}
		}
		rounds++
	}
	t.Stop()
	elapsed := time.Since(start)
	fmt.Printf("interval %s, %s window, both daemons running at once\n\n", iv, elapsed.Round(time.Millisecond))
	fmt.Println("| daemon | values | rounds | CPU per round | % of one core | RSS |")
	fmt.Println("|---|---|---|---|---|---|")
	var per []float64
	for _, dm := range daemons {
		c1, err := cpuNanos(dm.cmd.Process.Pid)
		if err != nil {
			return err
		}
		cpu := float64(c1 - dm.c0)
		n := rounds
		if !dm.scraped {
			n = int(elapsed / iv) // the sampler's own ticks
		}
		rss, _ := rss(dm.cmd.Process.Pid)
		values := 0
		if b, err := get("http://" + dm.addr + "/metrics"); err == nil {
			values = countValues(b)
		}
		per = append(per, cpu/float64(max(n, 1)))
		fmt.Printf("| %s | %d | %d | %.1f µs | %.3f %% | %.1f MiB |\n", dm.name, values, n,
			cpu/float64(max(n, 1))/1e3, 100*cpu/float64(elapsed), float64(rss)/(1<<20))
	}
	if len(per) == 2 {
		fmt.Printf("\nvigil CPU per tick / node_exporter CPU per scrape = %.3f\n", per[0]/per[1])
	}
	return nil
}

type daemon struct {
	name, addr, bin string
	args            []string
	scraped         bool
	cmd             *exec.Cmd
	c0              int64
}

func (dm *daemon) start(ctx context.Context) error {
	dm.cmd = exec.CommandContext(ctx, dm.bin, dm.args...)
	dm.cmd.Stderr = os.Stderr
	if err := dm.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", dm.bin, err)
	}
	for i := 0; i < 100; i++ {
		if b, err := get("http://" + dm.addr + "/metrics"); err == nil && len(b) > 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: no /metrics at %s", dm.name, dm.addr)
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
