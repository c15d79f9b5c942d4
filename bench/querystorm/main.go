// Command querystorm measures whether heavy queries starve ingestion
// (issue 11): it fills a data directory with --history of simulated nodes
// (package simulate), starts `vigil server` on it, streams the same nodes
// into the server over the wire at 1 Hz, and once they are all up fires
// --queries concurrent heavy range queries for --duration while a probe
// asks the cheap `count(up == 1)` every --probe.
//
//	go run ./bench/querystorm --vigil bin/vigil [--nodes 200 --history 30m --duration 60s --queries 200]
//
// It reports the ticks the simulated nodes dropped (their queue filled
// because the server fell behind), the nodes the server marked down
// (every one false: all nodes send throughout), the probe's latency
// (p50, p99, max) and failures, the heavy queries' answers by status, and
// the server's peak RSS. Everything runs on loopback on one machine: the
// simulator and the query clients compete with the server for the cores.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/wire"
)

type options struct {
	vigil                  string
	nodes, cpus, queries   int
	history, duration      time.Duration
	probe, rng, step       time.Duration
	query                  string
	serverArgs, keep       string
	groupSize              int
	timeout, retryWaitCeil time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.vigil, "vigil", "bin/vigil", "vigil binary")
	flag.IntVar(&o.nodes, "nodes", 200, "simulated nodes")
	flag.IntVar(&o.cpus, "cpus", 2, "cores per simulated node (series per node grow with it)")
	flag.IntVar(&o.queries, "queries", 200, "concurrent heavy query clients")
	flag.DurationVar(&o.history, "history", 30*time.Minute, "data written before the server starts")
	flag.DurationVar(&o.duration, "duration", 60*time.Second, "length of the query storm")
	flag.DurationVar(&o.probe, "probe", 500*time.Millisecond, "interval of the cheap probe query")
	flag.StringVar(&o.query, "query", `rate(node_cpu_seconds_total[5m])`, "heavy query")
	flag.DurationVar(&o.rng, "range", 30*time.Minute, "range of the heavy query, ending now")
	flag.DurationVar(&o.step, "step", 5*time.Second, "step of the heavy query")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "client timeout of a heavy query")
	flag.DurationVar(&o.retryWaitCeil, "retry-wait", time.Second, "longest wait a client honours of a Retry-After")
	flag.StringVar(&o.serverArgs, "server-args", "", "extra arguments of vigil server (space-separated)")
	flag.StringVar(&o.keep, "dir", "", "data directory to use and keep (default: a temporary one)")
	flag.IntVar(&o.groupSize, "group", 100, "simulated nodes per wire connection")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "querystorm:", err)
		os.Exit(1)
	}
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func run(o options) error {
	dir := o.keep
	if dir == "" {
		d, err := os.MkdirTemp("", "querystorm")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	sch := simulate.NewSchema(o.cpus)
	nodes := make([]*simulate.Node, o.nodes)
	for i := range nodes {
		nodes[i] = simulate.NewNode(simulate.NodeName(i+1), sch, uint64(i+1))
	}
	start := time.Now().Truncate(time.Second)
	if err := prefill(dir, nodes, start.Add(-o.history), start); err != nil {
		return err
	}
	fmt.Printf("prefilled %d nodes × %d series × %s in %s\n", o.nodes, sch.Len(), o.history, time.Since(start).Round(time.Second))

	httpAddr, err := freePort()
	if err != nil {
		return err
	}
	streamAddr, err := freePort()
	if err != nil {
		return err
	}
	logPath := filepath.Join(dir, "server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"server", "--data", filepath.Join(dir, "data"), "--http", httpAddr, "--listen", streamAddr, "--interval", "1s"}
	if o.serverArgs != "" {
		args = append(args, strings.Fields(o.serverArgs)...)
	}
	cmd := exec.Command(o.vigil, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", o.vigil, err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	base := "http://" + httpAddr
	if err := waitReady(base, 60*time.Second); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients, err := stream(ctx, nodes, o.groupSize, streamAddr)
	if err != nil {
		return err
	}
	// Warm up: every node up, and a few ticks each.
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, _, err := instant(base, "count(up == 1)")
		if err == nil && int(v) == o.nodes {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodes not all up after 60s: %v %v", v, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
	dropped0 := dropped(clients)
	downs0, err := countDowns(logPath)
	if err != nil {
		return err
	}

	var rss rssPeak
	rss.sample(cmd.Process.Pid)
	before, beforeAnon := rss.peak.Load(), rss.anon.Load()
	go rss.watch(ctx, cmd.Process.Pid)
	stormCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
		heavyOK  []time.Duration
	)
	hc := &http.Client{Timeout: o.timeout, Transport: &http.Transport{MaxIdleConnsPerHost: o.queries}}
	stormStart := time.Now()
	for range o.queries {
		wg.Go(func() {
			for stormCtx.Err() == nil {
				now := time.Now()
				u := base + "/api/v1/query_range?" + url.Values{
					"query": {o.query}, "start": {ts(now.Add(-o.rng))}, "end": {ts(now)}, "step": {o.step.String()},
				}.Encode()
				req, _ := http.NewRequestWithContext(stormCtx, "GET", u, nil)
				resp, err := hc.Do(req)
				code := 0
				var wait time.Duration
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
						wait = min(time.Duration(s)*time.Second, o.retryWaitCeil)
					}
				} else if stormCtx.Err() != nil {
					return
				}
				mu.Lock()
				statuses[code]++
				if code == 200 {
					heavyOK = append(heavyOK, time.Since(now))
				}
				mu.Unlock()
				if wait > 0 {
					select {
					case <-stormCtx.Done():
					case <-time.After(wait):
					}
				}
			}
		})
	}
	var probes []time.Duration
	probeFail, probeShort := 0, 0
	t := time.NewTicker(o.probe)
	for stormCtx.Err() == nil {
		select {
		case <-stormCtx.Done():
		case <-t.C:
			st := time.Now()
			v, code, err := instant(base, "count(up == 1)")
			d := time.Since(st)
			switch {
			case err != nil || code != 200:
				probeFail++
			default:
				probes = append(probes, d)
				if int(v) != o.nodes {
					probeShort++
				}
			}
		}
	}
	t.Stop()
	wg.Wait()
	stormLen := time.Since(stormStart)
	// Let ingest catch up before counting.
	time.Sleep(5 * time.Second)
	droppedN := dropped(clients) - dropped0
	downs, err := countDowns(logPath)
	if err != nil {
		return err
	}
	cancel()

	fmt.Printf("storm: %d clients of %q over %s step %s for %s; %d nodes streaming %d values a tick each\n",
		o.queries, o.query, o.rng, o.step, stormLen.Round(time.Second), o.nodes, sch.Len())
	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	fmt.Print("heavy answers:")
	for _, c := range codes {
		fmt.Printf(" %d×%d", statuses[c], c)
	}
	slices.Sort(heavyOK)
	fmt.Printf("; successful p50 %s\n", pct(heavyOK, 50))
	slices.Sort(probes)
	fmt.Printf("probe count(up == 1): %d answered, %d failed, %d short of %d nodes; latency p50 %s p99 %s max %s\n",
		len(probes), probeFail, probeShort, o.nodes, pct(probes, 50), pct(probes, 99), pct(probes, 100))
	fmt.Printf("ticks dropped by the nodes: %d of %d (%.2f %%)\n", droppedN, int(stormLen.Seconds())*o.nodes,
		100*float64(droppedN)/float64(max(1, int(stormLen.Seconds())*o.nodes)))
	fmt.Printf("nodes falsely marked down: %d\n", downs-downs0)
	// File-backed pages (the TSDB's mmapped chunks a query read) count in
	// RSS but are the kernel's to drop; RssAnon is the heap.
	fmt.Printf("server RSS before the storm %d MiB (anonymous %d MiB); peak during it %d MiB (anonymous %d MiB); VmHWM %d MiB\n",
		before>>10, beforeAnon>>10, rss.peak.Load()>>10, rss.anon.Load()>>10, rss.hwm.Load()>>10)
	return nil
}

func ts(t time.Time) string { return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64) }

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := min(len(d)-1, (len(d)*p+99)/100-1)
	return d[max(0, i)].Round(time.Millisecond)
}

// prefill writes the nodes' ticks from t0 to t1 into dir/data with the
// store, as the server would have.
func prefill(dir string, nodes []*simulate.Node, t0, t1 time.Time) error {
	st, err := store.Open(store.Options{Dir: filepath.Join(dir, "data")})
	if err != nil {
		return err
	}
	var b metric.Batch
	for t := t0; t.Before(t1); t = t.Add(time.Second) {
		for i, n := range nodes {
			b.Reset(t)
			n.Sample(t, time.Second, &b)
			if err := st.AppendTick(simulate.NodeName(i+1), t, b.Descs, b.Values, true); err != nil {
				st.Close()
				return err
			}
		}
	}
	return st.Close()
}

// stream sends every node's tick each second, as `vigil simulate` does.
func stream(ctx context.Context, nodes []*simulate.Node, groupSize int, addr string) ([]*wire.Client, error) {
	var clients []*wire.Client
	log := slog.New(slog.DiscardHandler)
	for lo := 0; lo < len(nodes); lo += groupSize {
		hi := min(lo+groupSize, len(nodes))
		c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{addr}, Name: "querystorm", Log: log,
			MaxQueueBytes: (hi - lo) * 32 << 10})
		if err != nil {
			return nil, err
		}
		var streams []*wire.ClientStream
		for i := lo; i < hi; i++ {
			streams = append(streams, c.NewStream(simulate.NodeName(i+1)))
		}
		clients = append(clients, c)
		go func() { _ = c.Run(ctx) }()
		go func() {
			var b metric.Batch
			next := time.Now().Truncate(time.Second).Add(time.Second)
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				for i, n := range nodes[lo:hi] {
					b.Reset(next)
					n.Sample(next, time.Second, &b)
					c.Tick(streams[i], b.Time, b.Descs, b.Values)
				}
				next = next.Add(time.Second)
				for time.Until(next) < 0 { // overrun: skip, as the sampler does
					next = next.Add(time.Second)
				}
			}
		}()
	}
	return clients, nil
}

func dropped(cs []*wire.Client) uint64 {
	var n uint64
	for _, c := range cs {
		n += c.Stats().Dropped.Load()
	}
	return n
}

func waitReady(base string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("server at %s not ready after %s", base, d)
}

var probeClient = &http.Client{Timeout: 60 * time.Second}

// instant evaluates qs now and returns its single value.
func instant(base, qs string) (float64, int, error) {
	resp, err := probeClient.Get(base + "/api/v1/query?query=" + url.QueryEscape(qs))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, resp.StatusCode, err
	}
	if len(r.Data.Result) == 0 {
		return 0, resp.StatusCode, nil
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, resp.StatusCode, err
}

func countDowns(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `msg="node down"`) {
			n++
		}
	}
	return n, sc.Err()
}

// rssPeak samples the server's resident set every 200 ms.
type rssPeak struct{ peak, anon, hwm atomic.Int64 } // KiB

func (r *rssPeak) watch(ctx context.Context, pid int) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for r.sample(pid) {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads the process's memory once; false when it is gone.
func (r *rssPeak) sample(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			if kb > r.peak.Load() {
				r.peak.Store(kb)
			}
		case "RssAnon:":
			if kb > r.anon.Load() {
				r.anon.Store(kb)
			}
		case "VmHWM:":
			r.hwm.Store(kb)
		}
	}
	return true
}
