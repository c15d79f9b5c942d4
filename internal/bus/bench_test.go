package bus

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/testutil/rabbitmq"
)

// simTick is one simulated node's tick (16 cores: about 300 values).
func simTick(tb testing.TB, cpus int) *metric.Batch {
	sch := simulate.NewSchema(cpus)
	n := simulate.NewNode("cn00001", sch, 1)
	var b metric.Batch
	t0 := time.Unix(1.7e9, 0)
	n.Sample(t0, time.Second, &b)
	b.Reset(t0.Add(time.Second))
	n.Sample(t0.Add(time.Second), time.Second, &b)
	return &b
}

// BenchmarkMetricsMessage encodes one node's tick as the bus does and
// reports its size per value, without and with the schema, and averaged
// over a minute at 1 Hz (one message in 60 carries the schema).
func BenchmarkMetricsMessage(b *testing.B) {
	for _, cpus := range []int{1, 16} {
		tick := simTick(b, cpus)
		bus := &Bus{m: newMetrics(nil), metrics: newRing(1, maxBufferBytes), nodes: map[string]*nodeSchema{}}
		bus.sc = map[string]*streamCounters{StreamMetrics: bus.m.streamCounters(StreamMetrics)}
		b.Run(fmt.Sprintf("cpus=%d", cpus), func(b *testing.B) {
			b.ReportAllocs()
			var plain, with int
			var ms []outMsg
			for b.Loop() {
				bus.Tick("cn00001", tick.Time, tick.Descs, tick.Values)
				ms = bus.metrics.take(ms[:0], 1, 0)
				m := &ms[0]
				if m.body[4]&flagSchema != 0 {
					with = len(m.body)
				} else {
					plain = len(m.body)
				}
				putBody(m) // as the publisher does
			}
			if plain == 0 { // one iteration only: the first carries the schema
				plain = metricsHeader + 8*len(tick.Values)
			}
			n := float64(len(tick.Values))
			b.ReportMetric(n, "values/msg")
			b.ReportMetric(float64(plain)/n, "B/value")
			b.ReportMetric(float64(with)/n, "B/value-schema")
			b.ReportMetric((59*float64(plain)+float64(with))/60/n, "B/value-1Hz-avg")
		})
	}
}

// The load benchmarks need a broker and a consumer in another process
// (this test binary again), so the server's CPU is measured alone.
const consumerEnv = "VIGIL_BUS_BENCH_CONSUMER"

func TestMain(m *testing.M) {
	if url := os.Getenv(consumerEnv); url != "" {
		benchConsumer(url)
		return
	}
	os.Exit(m.Run())
}

// benchConsumer consumes the queue named on stdin's first line until
// stdin closes, then prints: messages, log messages, latency p50 and p99
// in ms (consume time minus the metrics tick time).
func benchConsumer(url string) {
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	queue := in.Text()
	conn, err := amqp.Dial(url)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	ch, _ := conn.Channel()
	ch.Qos(5000, 0, false)
	ds, err := ch.Consume(queue, "", false, true, false, false, nil)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	stop := make(chan struct{})
	go func() {
		for in.Scan() {
		}
		close(stop)
	}()
	var msgs, logs int
	var lat []float64
	n := 0
	for {
		select {
		case d := <-ds:
			msgs++
			if d.ContentType == ContentMetrics && len(d.Body) >= metricsHeader {
				if m, err := DecodeMetrics(d.Body); err == nil {
					lat = append(lat, float64(time.Since(m.Time).Microseconds())/1000)
				}
			} else {
				logs += strings.Count(string(d.Body), `"seq":`)
			}
			if n++; n%1000 == 0 {
				d.Ack(true)
			}
			continue
		case <-stop:
		}
		break
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(p*float64(len(lat)-1))]
	}
	fmt.Println(msgs, logs, q(0.5), q(0.99))
	conn.Close()
}

type consumerProc struct {
	cmd   *exec.Cmd
	stdin *os.File
	out   *bufio.Reader
}

func startConsumer(b *testing.B, url, queue string) *consumerProc {
	r, w, _ := os.Pipe()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), consumerEnv+"="+url)
	cmd.Stdin = r
	outR, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	r.Close()
	fmt.Fprintln(w, queue)
	return &consumerProc{cmd: cmd, stdin: w, out: bufio.NewReader(outR)}
}

func (c *consumerProc) stop() (msgs, logs int, p50, p99 float64) {
	c.stdin.Close()
	line, _ := c.out.ReadString('\n')
	c.cmd.Wait()
	fmt.Sscan(line, &msgs, &logs, &p50, &p99)
	return
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func declareQueue(b *testing.B, url, name, key string) {
	conn, err := amqp.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	ch.ExchangeDeclare(DefaultExchange, "topic", true, false, false, false, nil)
	if _, err := ch.QueueDeclare(name, false, false, false, false, amqp.Table{"x-max-length": int32(2_000_000)}); err != nil {
		b.Fatal(err)
	}
	ch.QueueBind(name, key, DefaultExchange, false, nil)
}

// BenchmarkBusMetrics20k publishes 20,000 nodes' ticks a second (a
// 16-core simulated node each) with confirms for 10 s, twice, interleaved
// with the same generator without the bus: publish rate, confirmed,
// p50/p99 tick-to-consume latency (a consumer in another process), and
// the CPU the bus adds to this process.
func BenchmarkBusMetrics20k(b *testing.B) {
	const nodes, rounds = 20000, 10
	br := rabbitmq.Start(b)
	url := br.URL("guest", "guest")
	declareQueue(b, url, "bench", "metrics.#")
	tick := simTick(b, 16)
	names := make([]string, nodes)
	for i := range names {
		names[i] = simulate.NodeName(i + 1)
	}
	// gen calls tick for every node each second, spread over it in 100
	// steps, for secs seconds.
	genFor := func(secs int, tickf func(node string, t time.Time)) time.Duration {
		start := time.Now()
		for r := range secs {
			for s := range 100 {
				at := start.Add(time.Duration(r)*time.Second + time.Duration(s)*10*time.Millisecond)
				time.Sleep(time.Until(at))
				now := time.Now()
				for i := s * nodes / 100; i < (s+1)*nodes/100; i++ {
					tickf(names[i], now)
				}
			}
		}
		return time.Since(start)
	}
	for b.Loop() {
		reg := prometheus.NewRegistry()
		bs, err := New(Config{URL: url}, Options{DataDir: b.TempDir(), Registerer: reg})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { bs.Run(ctx); close(done) }()
		tickBus := func(node string, t time.Time) { bs.Tick(node, t, tick.Descs, tick.Values) }
		// Warm-up: every node's first tick carries its schema (17 KB).
		genFor(3, tickBus)
		for bs.bufferLen() > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		var without, with []float64
		var rate, p50, p99, dropped float64
		var allocs, allocBytes float64 // per message, with minus without
		for range 2 {
			// Without: the values copied as a server would keep them, no bus.
			sink := make([]float64, len(tick.Values))
			m0 := memStats()
			c0 := cpuSeconds()
			d := genFor(rounds, func(string, time.Time) { copy(sink, tick.Values) })
			without = append(without, (cpuSeconds()-c0)/d.Seconds())
			m1 := memStats()

			purgeQueue(b, url, "bench")
			cons := startConsumer(b, url, "bench")
			conf0 := testutil.ToFloat64(bs.m.confirmed.WithLabelValues(StreamMetrics))
			drop0 := droppedMetrics(bs)
			m2 := memStats()
			c0 = cpuSeconds()
			d = genFor(rounds, tickBus)
			with = append(with, (cpuSeconds()-c0)/d.Seconds())
			m3 := memStats()
			allocs += (float64(m3.Mallocs-m2.Mallocs) - float64(m1.Mallocs-m0.Mallocs)) / (2 * nodes * rounds)
			allocBytes += (float64(m3.TotalAlloc-m2.TotalAlloc) - float64(m1.TotalAlloc-m0.TotalAlloc)) / (2 * nodes * rounds)
			confirmed := testutil.ToFloat64(bs.m.confirmed.WithLabelValues(StreamMetrics)) - conf0
			time.Sleep(2 * time.Second) // the last deliveries
			msgs, _, l50, l99 := cons.stop()
			dropped = droppedMetrics(bs) - drop0
			rate, p50, p99 = confirmed/d.Seconds(), l50, l99
			b.Logf("round: %d ticks in %.1fs, %.0f confirmed, %d consumed, %.0f dropped, p50 %.1f ms, p99 %.1f ms, cpu without %.3f with %.3f",
				nodes*rounds, d.Seconds(), confirmed, msgs, dropped, l50, l99, without[len(without)-1], with[len(with)-1])
		}
		cancel()
		<-done
		bs.Close()
		b.ReportMetric(rate, "confirmed/s")
		b.ReportMetric(p50, "p50-ms")
		b.ReportMetric(p99, "p99-ms")
		b.ReportMetric(dropped, "dropped")
		added := (with[0]+with[1])/2 - (without[0]+without[1])/2
		b.ReportMetric(added, "cores-added")
		b.ReportMetric(added/nodes*1e6, "µs/msg")
		b.ReportMetric(allocs, "allocs/msg")
		b.ReportMetric(allocBytes, "B-alloc/msg")
	}
}

func memStats() runtime.MemStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

func droppedMetrics(bs *Bus) float64 {
	n := 0.0
	for _, r := range []string{"buffer_full", "unconfirmed", "nacked"} {
		n += testutil.ToFloat64(bs.m.dropped.WithLabelValues(StreamMetrics, r))
	}
	return n
}

func purgeQueue(b *testing.B, url, name string) {
	conn, err := amqp.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	ch.QueuePurge(name, false)
}

// BenchmarkBusLogs pushes 1,000,000 log messages through the bus in
// batches (stored groups of 10,000, as the log service's commits; 1000 a
// message, 5 apps × 3 severities) and reports log messages a second from
// the first Logs call to the last consumed, and that none was lost.
func BenchmarkBusLogs(b *testing.B) {
	const total, group = 1_000_000, 10_000
	br := rabbitmq.Start(b)
	url := br.URL("guest", "guest")
	declareQueue(b, url, "logs", "logs.#")
	recs := make([]logstore.Record, group)
	apps := []string{"sshd", "slurmd", "kernel", "munged", "systemd"}
	for i := range recs {
		recs[i] = logstore.Record{Time: time.Now(), Received: time.Now(), Host: "cn" + strconv.Itoa(i%500), App: apps[i%5],
			Severity: uint8(3 + i%3), Pattern: uint64(i % 40), Text: "pam_unix(sshd:session): session opened for user alice(uid=1000) by (uid=0) " + strconv.Itoa(i)}
	}
	for b.Loop() {
		bs, err := New(Config{URL: url, SpoolBytes: 4 << 30}, Options{DataDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		cons := startConsumer(b, url, "logs")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { bs.Run(ctx); close(done) }()
		start := time.Now()
		for n := 0; n < total; n += group {
			for i := range recs {
				recs[i].Seq = uint64(n + i + 1)
			}
			bs.Logs(recs)
		}
		spooled := time.Since(start)
		for {
			if w, _ := bs.spool.waiting(); w == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		confirmedAt := time.Since(start)
		time.Sleep(time.Second)
		cancel()
		<-done
		bs.Close()
		msgs, logs, _, _ := cons.stop()
		b.Logf("%d log messages: spooled in %.2fs, confirmed in %.2fs; consumer got %d messages, %d log messages", total, spooled.Seconds(), confirmedAt.Seconds(), msgs, logs)
		if logs != total {
			b.Errorf("consumer got %d log messages of %d", logs, total)
		}
		b.ReportMetric(float64(total)/confirmedAt.Seconds(), "logs/s")
		b.ReportMetric(float64(total)/spooled.Seconds(), "logs/s-spooled")
	}
}
