// Command consume is the measuring consumer of bench/bus/server_cpu.sh: it
// binds a private queue to the bus, skips --warm, then for --dur counts the
// metrics messages it gets, their tick-to-consume latency (consume time −
// the tick time in the message, ms) and body bytes per value, and prints one
// line; it then consumes on until killed. A `vigil bus tail` would spend
// more of the shared cores on printing.
//
//	go run ./bench/bus/consume --amqp amqp://guest:guest@127.0.0.1:5672/ --warm 15s --dur 30s
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/vigil-hpc/vigil/internal/bus"
)

func main() {
	url := flag.String("amqp", "", "broker URL")
	bind := flag.String("bind", "metrics.#", "routing key pattern")
	exchange := flag.String("exchange", bus.DefaultExchange, "exchange")
	warm := flag.Duration("warm", 15*time.Second, "skip this long after start")
	dur := flag.Duration("dur", 30*time.Second, "then measure this long")
	flag.Parse()
	if err := run(*url, *bind, *exchange, *warm, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "consume:", err)
		os.Exit(1)
	}
}

// maxLatency bounds the histogram (1 ms buckets); later ones count in the last.
const maxLatency = 120_000

func run(url, bind, exchange string, warm, dur time.Duration) error {
	cfg := bus.Config{URL: url, Exchange: exchange}
	if err := cfg.Validate(); err != nil {
		return err
	}
	conn, err := cfg.Dial("bench consume")
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	if ch, err = bus.DeclareExchange(conn, ch, exchange); err != nil {
		return err
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return err
	}
	if err := ch.QueueBind(q.Name, bind, exchange, false, nil); err != nil {
		return err
	}
	if err := ch.Qos(4096, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.Consume(q.Name, "", false, true, false, false, nil)
	if err != nil {
		return err
	}
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+dur)
	hist := make([]int64, maxLatency+1)
	var msgs, schemas, values, bodyBytes, bad, unacked int64
	timeout := time.NewTimer(warm + dur)
	defer timeout.Stop()
	for {
		select {
		case <-timeout.C:
			// Report, then go on consuming until killed, so the broker
			// and the measured processes see the same load to the end.
			report(hist, msgs, schemas, values, bodyBytes, bad, dur)
		case d, ok := <-deliveries:
			if !ok {
				return fmt.Errorf("deliveries closed")
			}
			now := time.Now()
			// Ack in groups: one frame per 256 messages.
			if unacked++; unacked >= 256 {
				if err := d.Ack(true); err != nil {
					return err
				}
				unacked = 0
			}
			if now.Before(from) || !now.Before(until) {
				continue
			}
			m, err := bus.DecodeMetrics(d.Body)
			if err != nil {
				bad++
				continue
			}
			msgs++
			values += int64(len(m.Values))
			bodyBytes += int64(len(d.Body))
			if m.Series != nil {
				schemas++
			}
			lat := now.Sub(m.Time).Milliseconds()
			hist[min(max(lat, 0), maxLatency)]++
		}
	}
}

func report(hist []int64, msgs, schemas, values, bodyBytes, bad int64, dur time.Duration) {
	q := func(p float64) int {
		want := max(int64(math.Ceil(p*float64(msgs))), 1)
		var c int64
		for ms, n := range hist {
			if c += n; c >= want {
				return ms
			}
		}
		return -1
	}
	bpv, vpm := 0.0, 0.0
	if values > 0 {
		bpv, vpm = float64(bodyBytes)/float64(values), float64(values)/float64(msgs)
	}
	fmt.Printf("consumed_per_s=%.0f min_ms=%d p50_ms=%d p99_ms=%d max_ms=%d values_per_msg=%.1f bytes_per_value=%.2f with_schema=%d bad=%d\n",
		float64(msgs)/dur.Seconds(), q(0), q(0.50), q(0.99), q(1), vpm, bpv, schemas, bad)
}
