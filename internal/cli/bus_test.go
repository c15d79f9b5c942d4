package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/vigil-hpc/vigil/internal/bus"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/testutil"
	"github.com/vigil-hpc/vigil/internal/testutil/rabbitmq"
)

// TestE2EBus runs simulated nodes and logger's syslog into a server with
// --amqp; `vigil bus tail` and a second consumer (a durable queue) both
// receive. The broker is stopped for 10 s mid-stream: every log message
// accepted meanwhile reaches the second consumer exactly once after it,
// in order by sequence number; metrics lost are counted on /metrics.
func TestE2EBus(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with rabbitmq-server")
	}
	loggerBin := testutil.LookPeer(t, "logger", "apt-get install bsdutils")
	br := rabbitmq.Start(t)
	url := br.URL("guest", "guest")
	second := newSecondConsumer(t, url)

	httpAddr, _ := loopbackAddr()
	wireAddr, _ := loopbackAddr()
	syslogAddr, _ := loopbackAddr()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	const interval = 200 * time.Millisecond
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := runServer(ctx, []string{"--http", httpAddr, "--listen", wireAddr, "--syslog-tcp", syslogAddr, "--data", dir,
			"--interval", interval.String(), "--amqp", url, "--log-level", "error"}, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	if err := waitListening(ctx, httpAddr); err != nil {
		t.Fatal(err)
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		simulate.Run(ctx, simulate.Options{Nodes: 20, CPUs: 1, Interval: interval, Upstream: []string{wireAddr}, GroupSize: 10, Seed: 1, Log: slog.New(slog.DiscardHandler)})
	}()
	var tail testutil.SyncBuffer
	go func() {
		defer wg.Done()
		if err := runBus(ctx, []string{"tail", "--amqp", url, "--bind", "logs.#", "--bind", "metrics.#"}, &tail, io.Discard); err != nil {
			t.Errorf("bus tail: %v", err)
		}
	}()

	// logger keeps one TCP connection and sends a line every 20 ms.
	host, port, _ := strings.Cut(syslogAddr, ":")
	lg := exec.CommandContext(ctx, loggerBin, "-T", "-n", host, "-P", port, "-t", "e2etest", "-p", "user.notice")
	stdin, _ := lg.StdinPipe()
	if err := lg.Start(); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); lg.Wait() }()
	sent := 0
	send := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			sent++
			fmt.Fprintf(stdin, "bus e2e message %d\n", sent)
			time.Sleep(20 * time.Millisecond)
		}
	}

	send(3 * time.Second)
	waitFor(t, 20*time.Second, "bus tail prints logs and metrics", func() bool {
		s := tail.String()
		return strings.Contains(s, "e2etest[notice] pattern=") && strings.Contains(s, "metrics.cn")
	}, func() string { s := tail.String(); return s[:min(len(s), 2000)] })
	br.Stop()
	outFrom := time.Now()
	stoppedAt := sent
	send(10 * time.Second) // the outage
	outage := sent - stoppedAt
	outTo := time.Now()
	br.Restart()
	send(2 * time.Second)

	waitFor(t, 30*time.Second, "every log message at the second consumer", func() bool { return second.logLines() >= sent }, func() string { return fmt.Sprint(second.logLines(), " of ", sent) })
	seqs, texts := second.logs()
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("logs message %d has seq %d: lost, repeated or out of order", i, s)
		}
	}
	for k := 1; k <= sent; k++ {
		if n := texts[fmt.Sprintf("bus e2e message %d", k)]; n != 1 {
			t.Errorf("log message %d arrived %d times", k, n)
		}
	}
	t.Logf("%d log messages (%d during the outage) in %d bus messages, each once", sent, outage, len(seqs))
	// Events: the log miner's new pattern, from the event store.
	waitFor(t, 10*time.Second, "events.log_new_pattern.* message", func() bool {
		second.mu.Lock()
		defer second.mu.Unlock()
		return slices.ContainsFunc(second.events, func(k string) bool { return strings.HasPrefix(k, "events.log_new_pattern.") })
	}, func() string { second.mu.Lock(); defer second.mu.Unlock(); return fmt.Sprint(second.events) })
	// The tail followed the broker back and prints what comes after it
	// bound its queue again.
	after := sent
	waitFor(t, 20*time.Second, "bus tail after the restart", func() bool {
		send(100 * time.Millisecond)
		out := tail.String()
		for k := after + 1; k <= sent; k++ {
			if strings.Contains(out, fmt.Sprintf("bus e2e message %d\n", k)) {
				return true
			}
		}
		return false
	}, nil)
	stdin.Close()
	// Metrics: the ticks buffered during the outage were sent after it;
	// whatever did not make it is counted.
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(body)
	for _, want := range []string{`vigil_bus_connected 1`, `vigil_bus_confirmed_total{stream="metrics"}`, `vigil_bus_confirmed_total{stream="logs"}`, `vigil_bus_disconnects_total`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	dropped := 0.0
	for _, l := range regexp.MustCompile(`(?m)^vigil_bus_dropped_total\{reason="[a-z_]+",stream="metrics"\} (\S+)$`).FindAllStringSubmatch(m, -1) {
		v, _ := strconv.ParseFloat(l[1], 64)
		dropped += v
	}
	mseqs := second.metricSeqs()
	missing := int(mseqs[len(mseqs)-1]) - len(mseqs)
	t.Logf("metrics: %d messages arrived, %d sequence numbers missing, %v counted dropped", len(mseqs), missing, dropped)
	waitFor(t, 20*time.Second, "metrics message of a tick during the outage (the memory buffer holds them)",
		func() bool { return second.outageTicks(outFrom.Add(time.Second), outTo) > 0 }, nil)
}

// secondConsumer reads a durable queue bound to logs.# and metrics.#,
// reconnecting after the broker restarts.
type secondConsumer struct {
	mu       sync.Mutex
	seqs     []int64
	texts    map[string]int
	lines    int
	mseqs    []int64
	tickTime []time.Time
	events   []string // routing keys
}

func newSecondConsumer(t *testing.T, url string) *secondConsumer {
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	ch, _ := conn.Channel()
	if _, err := bus.DeclareExchange(conn, ch, bus.DefaultExchange); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("second", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"logs.#", "metrics.#", "events.#"} {
		if err := ch.QueueBind("second", k, bus.DefaultExchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	c := &secondConsumer{texts: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			c.consume(ctx, url)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return c
}

func (c *secondConsumer) consume(ctx context.Context, url string) {
	conn, err := amqp.Dial(url)
	if err != nil {
		return
	}
	defer conn.Close()
	ch, _ := conn.Channel()
	ds, err := ch.ConsumeWithContext(ctx, "second", "", true, false, false, false, nil)
	if err != nil {
		return
	}
	for d := range ds {
		seq, _ := d.Headers[bus.HeaderSeq].(int64)
		c.mu.Lock()
		switch d.Headers[bus.HeaderStream] {
		case bus.StreamLogs:
			var lb bus.LogBatch
			json.Unmarshal(d.Body, &lb)
			c.seqs = append(c.seqs, seq)
			for _, l := range lb.Messages {
				c.texts[l.Text]++
				c.lines++
			}
		case bus.StreamEvents:
			c.events = append(c.events, d.RoutingKey)
		case bus.StreamMetrics:
			c.mseqs = append(c.mseqs, seq)
			if m, err := bus.DecodeMetrics(d.Body); err == nil {
				c.tickTime = append(c.tickTime, m.Time)
			}
		}
		c.mu.Unlock()
	}
}

func (c *secondConsumer) logLines() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

func (c *secondConsumer) logs() ([]int64, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.seqs...), c.texts
}

func (c *secondConsumer) metricSeqs() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.mseqs...)
}

func (c *secondConsumer) outageTicks(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.tickTime {
		if t.After(from) && t.Before(to) {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool, show func() string) {
	t.Helper()
	for end := time.Now().Add(d); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			if show != nil {
				t.Fatalf("after %s: no %s:\n%s", d, what, show())
			}
			t.Fatalf("after %s: no %s", d, what)
		}
	}
}

func TestBusTailUsage(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{nil, {"head"}, {"tail"}, {"tail", "--amqp", "amqp://127.0.0.1:1/"}, {"tail", "--bind", "x"}, {"tail", "--amqp", "http://x/", "--bind", "#"}} {
		err := runBus(ctx, args, io.Discard, io.Discard)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != 2 {
			t.Errorf("vigil bus %q: %v, want a usage error", args, err)
		}
	}
	// Nothing listens: a clear error at once, not a retry loop.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	err := runBus(ctx, []string{"tail", "--amqp", "amqp://u:pw@" + addr + "/", "--bind", "logs.#"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "amqp: connect to amqp://u:xxxxx@"+addr) {
		t.Errorf("unreachable broker: %v", err)
	}
}
