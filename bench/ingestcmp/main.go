// Command ingestcmp measures the store side of issue 4 in one run:
//
//   - sustained ingest of the same simulated node data (package simulate,
//     about 320 values per node and tick, synthetic 1 Hz timestamps, replayed
//     as fast as possible) into the vigil store in-process via AppendTick,
//     and into Prometheus through its remote-write receiver with a
//     concurrent client; samples/s for each and the ratio;
//
//   - bytes per sample on disk after compacting the head into a block, on
//     the same kind of data over a longer span, for one or more chunk sizes;
//
//   - query_range over one hour of one metric for many nodes at 1 Hz:
//     rate(m[1m]) and the plain selector at step 15s, in-process through
//     the query engine, on the head and again after compaction; medians.
//
//     go run ./bench/ingestcmp [--nodes 200 --ticks 300] [--prometheus /usr/bin/prometheus] [--victoria-metrics /usr/bin/victoria-metrics]
//
// With --victoria-metrics the same remote-write requests go to a
// VictoriaMetrics single-node server too (ingest phase), and the bytes
// phase's data is stored there and its parts merged before it is measured.
//
// Both sides get the data prepared beforehand: vigil gets the values,
// Prometheus snappy-compressed WriteRequests (one sample per series per
// request, at most --batch samples each, as Prometheus' own remote write
// sends), so neither timing includes generating or encoding. Each worker
// owns a fixed share of the nodes and sends their ticks in order, so no
// sample arrives out of order.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/prometheus/prometheus/tsdb"

	"github.com/vigil-hpc/vigil/bench/internal/benchutil"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/wire"
)

type options struct {
	nodes, ticks, cpus, workers, batch int
	prometheus, vigil                  string
	victoriaMetrics                    string
	bytesNodes, bytesTicks             int
	chunkSizes                         string
	replay                             *simulate.Recording
	queryNodes, querySeconds, runs     int
	phases, cpuProfile, queryProfile   string
	keep                               bool
}

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", 200, "simulated nodes for the ingest comparison")
	flag.IntVar(&o.ticks, "ticks", 300, "ticks (seconds) per node for the ingest comparison")
	flag.IntVar(&o.cpus, "cpus", 16, "cores per simulated node (16: about 320 values per tick)")
	replay := flag.String("replay", "", "replay this recording (`vigil record`) on every node instead of the synthetic model (ingest and bytes phases)")
	flag.IntVar(&o.workers, "workers", 4, "concurrent appenders / remote-write clients")
	flag.IntVar(&o.batch, "batch", 2000, "samples per remote-write request (Prometheus' max_samples_per_send)")
	flag.StringVar(&o.prometheus, "prometheus", "/usr/bin/prometheus", "Prometheus binary (empty: skip it)")
	flag.StringVar(&o.victoriaMetrics, "victoria-metrics", "", "VictoriaMetrics single-node binary, e.g. /usr/bin/victoria-metrics: also fed by remote write (ingest and bytes phases; empty: skip)")
	flag.StringVar(&o.vigil, "vigil", "", "vigil binary: also stream the data into `vigil server --listen` (empty: skip)")
	flag.IntVar(&o.bytesNodes, "bytes-nodes", 20, "nodes for the bytes-per-sample measurement")
	flag.IntVar(&o.bytesTicks, "bytes-ticks", 3600, "ticks per node for the bytes-per-sample measurement")
	flag.StringVar(&o.chunkSizes, "samples-per-chunk", strconv.Itoa(store.DefaultSamplesPerChunk), "comma-separated chunk sizes to measure bytes per sample with")
	flag.IntVar(&o.queryNodes, "query-nodes", 10000, "series (nodes) of the query_range dataset")
	flag.IntVar(&o.querySeconds, "query-seconds", 3600, "seconds of 1 Hz data per series in the query dataset")
	flag.IntVar(&o.runs, "runs", 5, "runs per query; the median is reported")
	flag.StringVar(&o.phases, "phases", "ingest,bytes,query", "comma-separated phases to run")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directories")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the vigil ingest to this file")
	flag.StringVar(&o.queryProfile, "query-cpuprofile", "", "write a CPU profile of the timed queries to this file")
	flag.Parse()
	if o.nodes <= 0 || o.ticks <= 0 || o.workers <= 0 || o.batch <= 0 || o.runs <= 0 {
		fmt.Fprintln(os.Stderr, "ingestcmp: --nodes, --ticks, --workers, --batch and --runs must be positive")
		os.Exit(2)
	}
	if *replay != "" {
		rec, err := simulate.LoadRecording(*replay)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ingestcmp: --replay:", err)
			os.Exit(2)
		}
		fmt.Printf("replaying %s: %d ticks of %d series\n", *replay, rec.Ticks(), rec.Series())
		o.replay = rec
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "ingestcmp:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	tmp, err := os.MkdirTemp("", "ingestcmp")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Println("data in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	for _, ph := range strings.Split(o.phases, ",") {
		var err error
		switch ph {
		case "ingest":
			err = ingest(o, filepath.Join(tmp, "ingest"))
		case "bytes":
			err = bytesPerSample(o, filepath.Join(tmp, "bytes"))
		case "query":
			err = queryRange(o, filepath.Join(tmp, "query"))
		default:
			err = fmt.Errorf("unknown phase %q", ph)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ph, err)
		}
	}
	return nil
}

// dataset is the simulated data, tick-major: ticks[k][n] is node n's
// k-th tick. Descriptor slices are shared while a node's schema is stable.
type dataset struct {
	names []string
	t0    time.Time
	ticks [][]tick
	total int
}

type tick struct {
	descs  []*metric.Desc
	values []float64
}

// source is one simulated node: the model or a replayed recording.
type source interface {
	Sample(t time.Time, dt time.Duration, b *metric.Batch)
}

func generate(o options, nodes, ticks int) *dataset {
	sch := simulate.NewSchema(o.cpus)
	// Synthetic timestamps end now, so both databases take them as fresh.
	t0 := time.Now().Add(-time.Duration(ticks) * time.Second).Truncate(time.Second)
	d := &dataset{t0: t0, ticks: make([][]tick, ticks)}
	sims := make([]source, nodes)
	last := make([][]*metric.Desc, nodes)
	for n := range sims {
		d.names = append(d.names, simulate.NodeName(n+1))
		if o.replay != nil {
			sims[n] = simulate.NewReplayNode(d.names[n], o.replay, n*o.replay.Ticks()/nodes)
		} else {
			sims[n] = simulate.NewNode(d.names[n], sch, uint64(n+1))
		}
	}
	var b metric.Batch
	for k := range ticks {
		d.ticks[k] = make([]tick, nodes)
		t := t0.Add(time.Duration(k) * time.Second)
		for n, sim := range sims {
			b.Reset(t)
			sim.Sample(t, time.Second, &b)
			descs := last[n]
			if !slices.Equal(descs, b.Descs) {
				descs = slices.Clone(b.Descs)
				last[n] = descs
			}
			vals := slices.Clone(b.Values)
			d.ticks[k][n] = tick{descs: descs, values: vals}
			d.total += len(vals)
		}
	}
	return d
}

func (d *dataset) time(k int) time.Time { return d.t0.Add(time.Duration(k) * time.Second) }

// byWorker runs f(worker, node) for every node, nodes split among workers.
func byWorker(workers, nodes int, f func(w int, nodes []int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		var mine []int
		for n := w; n < nodes; n += workers {
			mine = append(mine, n)
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[w] = f(w, mine) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func ingest(o options, dir string) error {
	fmt.Printf("== ingest: %d nodes x %d ticks, %d workers\n", o.nodes, o.ticks, o.workers)
	d := generate(o, o.nodes, o.ticks)
	fmt.Printf("dataset: %d samples, %.0f values per node and tick\n", d.total, float64(d.total)/float64(o.nodes*o.ticks))

	// Vigil, in-process.
	st, err := store.Open(store.Options{Dir: filepath.Join(dir, "vigil")})
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	cpu0 := selfCPU()
	start := time.Now()
	err = byWorker(o.workers, o.nodes, func(_ int, mine []int) error {
		for k := range d.ticks {
			for _, n := range mine {
				tk := d.ticks[k][n]
				if err := st.AppendTick(d.names[n], d.time(k), tk.descs, tk.values, false); err != nil {
					return err
				}
			}
		}
		return nil
	})
	vigilDur := time.Since(start)
	vigilCPU := selfCPU() - cpu0
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	stats := st.Stats()
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	vigilRate := float64(d.total) / vigilDur.Seconds()
	fmt.Printf("vigil AppendTick:        %12.0f samples/s  (%s wall, %.1f CPU-s: %.0f samples per CPU-s; %d ticks, head series %d)\n",
		vigilRate, vigilDur.Round(time.Millisecond), vigilCPU.Seconds(), float64(d.total)/vigilCPU.Seconds(), stats.Ticks, stats.HeadSeries)

	if o.vigil != "" {
		if err := ingestWire(o, d, filepath.Join(dir, "wire"), vigilRate); err != nil {
			return fmt.Errorf("wire: %w", err)
		}
	}
	if o.prometheus == "" && o.victoriaMetrics == "" {
		return nil
	}
	reqs, err := encodeRequests(d, o)
	if err != nil {
		return err
	}
	if o.victoriaMetrics != "" {
		if err := ingestVM(o, d, reqs, filepath.Join(dir, "victoria-metrics"), vigilRate, vigilCPU); err != nil {
			return fmt.Errorf("victoria-metrics: %w", err)
		}
	}
	if o.prometheus == "" {
		return nil
	}
	p, err := startPrometheus(o.prometheus, filepath.Join(dir, "prometheus"))
	if err != nil {
		return err
	}
	defer p.stop()
	url := "http://" + p.addr + "/api/v1/write"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.workers}}
	before, err := p.appended()
	if err != nil {
		return err
	}
	var failed atomic.Int64
	pcpu0, perr := procCPU(p.cmd.Process.Pid)
	ccpu0 := selfCPU()
	start = time.Now()
	err = byWorker(o.workers, o.workers, func(w int, _ []int) error {
		for _, body := range reqs[w] {
			if err := postWrite(client, url, body); err != nil {
				if failed.Add(1) == 1 {
					fmt.Println("first remote-write error:", err)
				}
			}
		}
		return nil
	})
	promDur := time.Since(start)
	clientCPU := selfCPU() - ccpu0
	pcpu1, perr1 := procCPU(p.cmd.Process.Pid)
	if err != nil {
		return err
	}
	after, err := p.appended()
	if err != nil {
		return err
	}
	promRate := float64(d.total) / promDur.Seconds()
	fmt.Printf("prometheus remote write: %12.0f samples/s  (%s, %d failed requests, head appended %0.f of %d)\n",
		promRate, promDur.Round(time.Millisecond), failed.Load(), after-before, d.total)
	printRSS("prometheus", p.cmd.Process.Pid)
	if perr == nil && perr1 == nil {
		pc := (pcpu1 - pcpu0).Seconds()
		fmt.Printf("prometheus CPU: %.1f CPU-s server (%.0f samples per CPU-s), %.1f CPU-s client\n", pc, float64(d.total)/pc, clientCPU.Seconds())
		fmt.Printf("ratio vigil/prometheus:  %12.1fx wall, %.1fx per CPU-s of the receiving process\n", vigilRate/promRate, pc/vigilCPU.Seconds())
	} else {
		fmt.Printf("ratio vigil/prometheus:  %12.1fx wall\n", vigilRate/promRate)
	}
	return nil
}

// encodeRequests prepares every worker's remote-write bodies: worker w
// owns nodes w, w+workers, ...; its requests go tick by tick so each
// series' samples arrive in order.
func encodeRequests(d *dataset, o options) ([][][]byte, error) {
	start := time.Now()
	// Label sets per node and descriptor, built once.
	lsets := make([]map[*metric.Desc][]prompb.Label, len(d.names))
	for n := range lsets {
		lsets[n] = map[*metric.Desc][]prompb.Label{}
	}
	lset := func(n int, desc *metric.Desc) []prompb.Label {
		if l, ok := lsets[n][desc]; ok {
			return l
		}
		ls := []prompb.Label{{Name: labels.MetricName, Value: desc.Name}, {Name: store.NodeLabel, Value: d.names[n]}}
		for _, l := range desc.Labels {
			ls = append(ls, prompb.Label{Name: l.Name, Value: l.Value})
		}
		slices.SortFunc(ls, func(a, b prompb.Label) int { return strings.Compare(a.Name, b.Name) })
		lsets[n][desc] = ls
		return ls
	}
	out := make([][][]byte, o.workers)
	var raw []byte
	bytesOut := 0
	for w := range o.workers {
		var req prompb.WriteRequest
		flush := func() error {
			if len(req.Timeseries) == 0 {
				return nil
			}
			size := req.Size()
			if cap(raw) < size {
				raw = make([]byte, size)
			}
			n, err := req.MarshalToSizedBuffer(raw[:size])
			if err != nil {
				return err
			}
			body := snappy.Encode(nil, raw[size-n:size])
			out[w] = append(out[w], body)
			bytesOut += len(body)
			req.Timeseries = req.Timeseries[:0]
			return nil
		}
		for k := range d.ticks {
			ts := d.time(k).UnixMilli()
			for n := w; n < len(d.names); n += o.workers {
				tk := d.ticks[k][n]
				for i, desc := range tk.descs {
					req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
						Labels:  lset(n, desc),
						Samples: []prompb.Sample{{Timestamp: ts, Value: tk.values[i]}},
					})
					if len(req.Timeseries) >= o.batch {
						if err := flush(); err != nil {
							return nil, err
						}
					}
				}
			}
		}
		if err := flush(); err != nil {
			return nil, err
		}
	}
	fmt.Printf("remote-write requests prepared: %d MiB compressed, in %s\n", bytesOut>>20, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// ingestWire streams the dataset into a `vigil server --listen` over the
// tree's wire protocol and times it until the server answers that every
// tick is stored. The client encodes on this goroutine, on the same
// machine, so its CPU competes with the server's.
func ingestWire(o options, d *dataset, dir string, inProcess float64) error {
	httpAddr, err := benchutil.FreeAddr()
	if err != nil {
		return err
	}
	streamAddr, err := benchutil.FreeAddr()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(o.vigil, "server", "--http", httpAddr, "--listen", streamAddr, "--data", dir, "--log-level", "warn", "--disable-rollups")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := wire.NewClient(wire.ClientOptions{Addrs: []string{streamAddr}, Name: "ingestcmp",
		Log: slog.New(slog.DiscardHandler), MaxQueueBytes: 1 << 30})
	if err != nil {
		return err
	}
	go func() { _ = c.Run(ctx) }()
	streams := make([]*wire.ClientStream, len(d.names))
	for n, name := range d.names {
		streams[n] = c.NewStream(name)
	}
	for deadline := time.Now().Add(20 * time.Second); !c.Stats().Connected.Load(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no connection to the server: %s", stderr.String())
		}
	}
	cpu0, _ := procCPU(cmd.Process.Pid)
	start := time.Now()
	for k := range d.ticks {
		for n, tk := range d.ticks[k] {
			c.Tick(streams[n], d.time(k), tk.descs, tk.values)
		}
	}
	queued := time.Since(start)
	// Every node's node_load1 has one sample per tick once all is stored.
	want := float64(len(d.names) * len(d.ticks))
	q := fmt.Sprintf("sum(count_over_time(node_load1[%ds]))", len(d.ticks)+60)
	var got float64
	for deadline := time.Now().Add(5 * time.Minute); got < want; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("server stored %.0f of %.0f ticks after 5 minutes (dropped %d): %s", got, want, c.Stats().Dropped.Load(), stderr.String())
		}
		if got, err = instantScalar("http://"+httpAddr, q, d.time(len(d.ticks))); err != nil {
			return err
		}
	}
	dur := time.Since(start)
	cpu1, _ := procCPU(cmd.Process.Pid)
	rate := float64(d.total) / dur.Seconds()
	sc := (cpu1 - cpu0).Seconds()
	fmt.Printf("vigil server via wire:   %12.0f samples/s  (%s wall, client queued all in %s, %d dropped; server %.1f CPU-s: %.0f samples per CPU-s; %.2fx of in-process)\n",
		rate, dur.Round(time.Millisecond), queued.Round(time.Millisecond), c.Stats().Dropped.Load(), sc, float64(d.total)/sc, rate/inProcess)
	printRSS("vigil server", cmd.Process.Pid)
	return nil
}

// instantScalar evaluates q at t and returns the single value (0 if the
// result is empty).
func instantScalar(server, q string, t time.Time) (float64, error) {
	resp, err := http.PostForm(server+"/api/v1/query", map[string][]string{"query": {q}, "time": {strconv.FormatInt(t.Unix(), 10)}})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, fmt.Errorf("query %s: %w", q, err)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("query %s: %s", q, r.Error)
	}
	if len(r.Data.Result) == 0 {
		return 0, nil
	}
	sv, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(sv, 64)
}

func postWrite(c *http.Client, url string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

type promProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr bytes.Buffer
}

func startPrometheus(bin, dir string) (*promProc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	// No scrape jobs: the receiver is all that runs.
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 1m\n"), 0o644); err != nil {
		return nil, err
	}
	addr, err := benchutil.FreeAddr()
	if err != nil {
		return nil, err
	}
	p := &promProc{addr: addr}
	p.cmd = exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--web.enable-remote-write-receiver", "--log.level=warn")
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("prometheus not ready after 30s: %s", p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return p, nil
}

func (p *promProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// appended reads prometheus_tsdb_head_samples_appended_total (summed over
// its type label) from Prometheus' own metrics.
func (p *promProc) appended() (float64, error) {
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "prometheus_tsdb_head_samples_appended_total") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("prometheus metrics: %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

// selfCPU is this process' user+system time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system time of pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat times")
	}
	return time.Duration(u+s) * 10 * time.Millisecond, nil // USER_HZ = 100
}

func bytesPerSample(o options, dir string) error {
	fmt.Printf("== bytes per sample: %d nodes x %d ticks\n", o.bytesNodes, o.bytesTicks)
	d := generate(o, o.bytesNodes, o.bytesTicks)
	for _, f := range strings.Split(o.chunkSizes, ",") {
		spc, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || spc < 1 {
			return fmt.Errorf("--samples-per-chunk: %q is not a positive number", f)
		}
		if err := bytesOnce(d, spc, filepath.Join(dir, strconv.Itoa(spc))); err != nil {
			return err
		}
	}
	if err := bytesPlainTSDB(d, filepath.Join(dir, "plain")); err != nil {
		return err
	}
	if o.victoriaMetrics == "" {
		return nil
	}
	return bytesVM(o, d, filepath.Join(dir, "victoria-metrics"))
}

// bytesPlainTSDB is the peer: the same data appended as it is to a
// Prometheus TSDB with its default options (120 samples a chunk, no
// integer scaling), as Prometheus itself would store it.
func bytesPlainTSDB(d *dataset, dir string) error {
	db, err := tsdb.Open(dir, slog.New(slog.DiscardHandler), nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		return err
	}
	defer db.Close()
	type key struct {
		node int
		desc *metric.Desc
	}
	lsets := map[key]labels.Labels{}
	for k := range d.ticks {
		ts := d.time(k).UnixMilli()
		for n, tk := range d.ticks[k] {
			app := db.Appender(context.Background())
			for i, desc := range tk.descs {
				ls, ok := lsets[key{n, desc}]
				if !ok {
					b := labels.NewBuilder(labels.FromStrings(labels.MetricName, desc.Name, store.NodeLabel, d.names[n]))
					for _, l := range desc.Labels {
						b.Set(l.Name, l.Value)
					}
					ls = b.Labels()
					lsets[key{n, desc}] = ls
				}
				if _, err := app.Append(0, ls, ts, tk.values[i]); err != nil {
					_ = app.Rollback()
					return err
				}
			}
			if err := app.Commit(); err != nil {
				return err
			}
		}
	}
	h := db.Head()
	if err := db.CompactHead(tsdb.NewRangeHead(h, h.MinTime(), h.MaxTime())); err != nil {
		return err
	}
	var samples uint64
	var total, chunkBytes int64
	for _, b := range db.Blocks() {
		samples += b.Meta().Stats.NumSamples
		total += b.Size()
		cb, err := dirSize(filepath.Join(b.Dir(), "chunks"))
		if err != nil {
			return err
		}
		chunkBytes += cb
	}
	if samples == 0 {
		return errors.New("plain TSDB: no block written")
	}
	fmt.Printf("-- peer, Prometheus TSDB defaults (120 samples a chunk, values as they are): %d samples\n", samples)
	fmt.Printf("bytes/sample: chunk files %.3f, whole block (with index) %.3f\n", float64(chunkBytes)/float64(samples), float64(total)/float64(samples))
	return nil
}

// bytesOnce stores the dataset with spc samples a chunk, compacts it into
// a block and prints its size per sample, overall and by metric family.
func bytesOnce(d *dataset, spc int, dir string) error {
	st, err := store.Open(store.Options{Dir: dir, SamplesPerChunk: spc})
	if err != nil {
		return err
	}
	defer st.Close()
	for k := range d.ticks {
		for n, tk := range d.ticks[k] {
			if err := st.AppendTick(d.names[n], d.time(k), tk.descs, tk.values, false); err != nil {
				return err
			}
		}
	}
	if err := st.CompactHead(); err != nil {
		return err
	}
	var samples, series, chunks uint64
	var total, chunkBytes int64
	for _, b := range st.Blocks() {
		samples += b.Samples
		series += b.Series
		chunks += b.Chunks
		total += b.Bytes
		cb, err := dirSize(filepath.Join(b.Dir, "chunks"))
		if err != nil {
			return err
		}
		chunkBytes += cb
	}
	if samples == 0 {
		return errors.New("no block written")
	}
	fmt.Printf("-- %d samples a chunk: block of %d samples, %d series, %d chunks (%.0f samples/chunk); %d values stored unscaled\n",
		spc, samples, series, chunks, float64(samples)/float64(chunks), st.Stats().UnscaledSamples)
	fmt.Printf("bytes/sample: chunk files %.3f, whole block (with index) %.3f\n", float64(chunkBytes)/float64(samples), float64(total)/float64(samples))
	fams, err := st.ChunkStats(context.Background())
	if err != nil {
		return err
	}
	names := make([]string, 0, len(fams))
	tb, ts := 0, 0
	for name, f := range fams {
		names = append(names, name)
		tb += f.Bytes
		ts += f.Samples
	}
	slices.SortFunc(names, func(a, b string) int { return fams[b].Bytes - fams[a].Bytes })
	fmt.Printf("chunk data %.3f bytes/sample; by family (share of bytes, bytes/sample):\n", float64(tb)/float64(ts))
	for _, name := range names[:min(12, len(names))] {
		f := fams[name]
		fmt.Printf("  %-40s %5.1f%%  %6.3f  (%d samples)\n", name, 100*float64(f.Bytes)/float64(tb), float64(f.Bytes)/float64(f.Samples), f.Samples)
	}
	return nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

func queryRange(o options, dir string) error {
	fmt.Printf("== query_range: %d series x %d s at 1 Hz\n", o.queryNodes, o.querySeconds)
	st, err := store.Open(store.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer st.Close()
	end := time.Now().Truncate(time.Minute)
	t0 := end.Add(-time.Duration(o.querySeconds) * time.Second)
	start := time.Now()
	if err := st.FillCounter("node_context_switches_total", o.queryNodes, o.querySeconds, t0, func(n int) string { return simulate.NodeName(n + 1) }); err != nil {
		return err
	}
	fmt.Printf("dataset built in %s\n", time.Since(start).Round(time.Millisecond))
	api := query.New(st, query.Options{Logger: nil})
	qs := []string{"rate(node_context_switches_total[1m])", "node_context_switches_total"}
	if o.queryProfile != "" {
		f, err := os.Create(o.queryProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	from := end.Add(-time.Hour)
	timeAll := func(where string) error {
		for _, q := range qs {
			var ds []time.Duration
			points := 0
			cpu0 := selfCPU()
			for range o.runs {
				s := time.Now()
				res, done, err := api.Range(context.Background(), q, from, end, 15*time.Second)
				if err == nil {
					err = res.Err
				}
				if err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
				m, err := res.Matrix()
				if err != nil {
					done()
					return err
				}
				points = 0
				for _, s := range m {
					points += len(s.Floats)
				}
				done()
				ds = append(ds, time.Since(s))
			}
			cpu := (selfCPU() - cpu0) / time.Duration(o.runs)
			slices.Sort(ds)
			fmt.Printf("%-6s %-40s median %7s  (min %s, max %s; %s CPU per run; %d points)\n", where, q, ds[len(ds)/2].Round(time.Millisecond),
				ds[0].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond), cpu.Round(time.Millisecond), points)
		}
		return nil
	}
	if err := timeAll("head"); err != nil {
		return err
	}
	if err := st.CompactHead(); err != nil {
		return err
	}
	return timeAll("block")
}
