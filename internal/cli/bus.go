package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/vigil-hpc/vigil/internal/bus"
	"github.com/vigil-hpc/vigil/internal/events"
)

func init() {
	register(Command{Name: "bus", Summary: "consume the RabbitMQ bus the server publishes to (bus tail)", Run: runBus})
}

const busUsage = "usage: vigil bus tail --amqp URL --bind KEY [--json] [--exchange vigil]"

func runBus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "tail" {
		return &ExitError{Code: 2, Err: errors.New(busUsage)}
	}
	fs := flag.NewFlagSet("vigil bus tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, busUsage); fs.PrintDefaults() }
	var cfg bus.Config
	fs.StringVar(&cfg.URL, "amqp", "", "the broker, amqp://USER:PASS@HOST:PORT/VHOST")
	fs.StringVar(&cfg.Exchange, "exchange", bus.DefaultExchange, "the topic exchange the server publishes to")
	fs.StringVar(&cfg.CredentialsFile, "credentials-file", "", "file of user:password replacing the URL's")
	fs.StringVar(&cfg.TLSCA, "tls-ca", "", "CA certificate (PEM) of an amqps:// broker")
	var binds []string
	fs.Func("bind", "routing key pattern to bind (repeatable): metrics.#, logs.err.*, events.node_down.*, jobs.#", func(s string) error {
		if s == "" || len(s) > 255 {
			return errors.New("want 1 to 255 bytes")
		}
		binds = append(binds, s)
		return nil
	})
	asJSON := fs.Bool("json", false, "print each message as one JSON line: routing key, headers and the decoded body")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 || cfg.URL == "" || len(binds) == 0 {
		return &ExitError{Code: 2, Err: errors.New(busUsage)}
	}
	if err := cfg.Validate(); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	out := bufio.NewWriter(stdout)
	p := &busPrinter{w: out, json: *asJSON, schemas: map[uint64][]string{}}
	// Follow the broker through restarts, as `logs tail` follows the server.
	wait := 500 * time.Millisecond
	for first := true; ; first = false {
		err := tailOnce(ctx, cfg, binds, p, out)
		if ctx.Err() != nil {
			return nil
		}
		if first && err != nil && !p.got {
			return err // a wrong URL or credentials: say so at once
		}
		fmt.Fprintf(stderr, "vigil bus tail: %v; connecting again\n", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func tailOnce(ctx context.Context, cfg bus.Config, binds []string, p *busPrinter, out *bufio.Writer) error {
	conn, err := cfg.Dial("vigil bus tail")
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("amqp: open channel: %w", err)
	}
	if ch, err = bus.DeclareExchange(conn, ch, cfg.Exchange); err != nil {
		return err
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fmt.Errorf("amqp: declare a queue: %w", err)
	}
	for _, k := range binds {
		if err := ch.QueueBind(q.Name, k, cfg.Exchange, false, nil); err != nil {
			return fmt.Errorf("amqp: bind %q: %w", k, err)
		}
	}
	if err := ch.Qos(1000, 0, false); err != nil {
		return fmt.Errorf("amqp: qos: %w", err)
	}
	deliveries, err := ch.ConsumeWithContext(ctx, q.Name, "", false, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("amqp: consume: %w", err)
	}
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	flush := time.NewTicker(200 * time.Millisecond)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			out.Flush()
			return ctx.Err()
		case e := <-closed:
			out.Flush()
			return fmt.Errorf("connection closed: %v", e)
		case <-flush.C:
			if err := out.Flush(); err != nil {
				return err
			}
		case d, ok := <-deliveries:
			if !ok {
				out.Flush()
				return errors.New("consumer cancelled")
			}
			p.print(&d)
			d.Ack(false)
			if len(deliveries) == 0 {
				if err := out.Flush(); err != nil {
					return err
				}
			}
		}
	}
}

// busPrinter prints deliveries; it remembers each node's metrics schema
// (bounded) to name the values of messages without one.
type busPrinter struct {
	w       io.Writer
	json    bool
	got     bool
	schemas map[uint64][]string
}

const maxTailSchemas = 4096

func (p *busPrinter) print(d *amqp.Delivery) {
	p.got = true
	stream, _ := d.Headers[bus.HeaderStream].(string)
	seq, _ := d.Headers[bus.HeaderSeq].(int64)
	var body any
	var human string
	switch {
	case d.ContentType == bus.ContentMetrics:
		m, err := bus.DecodeMetrics(d.Body)
		if err != nil {
			body, human = map[string]any{"error": err.Error()}, err.Error()
			break
		}
		if m.Series != nil {
			if len(p.schemas) >= maxTailSchemas {
				clear(p.schemas)
			}
			p.schemas[m.SchemaID] = m.Series
		}
		series := p.schemas[m.SchemaID]
		vals := map[string]any{}
		var b strings.Builder
		for i, v := range m.Values {
			name := fmt.Sprintf("#%d", i)
			if i < len(series) {
				name = series[i]
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				vals[name] = fmt.Sprint(v) // JSON has no NaN
			} else {
				vals[name] = v
			}
			if i < 3 {
				fmt.Fprintf(&b, " %s=%g", name, v)
			}
		}
		body = map[string]any{"time": m.Time.UTC(), "schema": fmt.Sprintf("%016x", m.SchemaID), "values": vals}
		human = fmt.Sprintf("%s %d values%s …", m.Time.UTC().Format(time.RFC3339Nano), len(m.Values), b.String())
		if series == nil {
			human += " (schema not seen yet)"
		}
	case stream == bus.StreamLogs:
		var lb bus.LogBatch
		if err := json.Unmarshal(d.Body, &lb); err != nil {
			body, human = map[string]any{"error": err.Error()}, err.Error()
			break
		}
		body = lb
		if !p.json { // one line per log message
			for _, l := range lb.Messages {
				fmt.Fprintf(p.w, "%s seq=%d %s %s %s[%s] pattern=%d %s\n", d.RoutingKey, seq, l.Time.UTC().Format(time.RFC3339Nano), l.Host, l.App, l.Severity, l.Pattern, oneLine(l.Text))
			}
			return
		}
	default:
		var e events.Event
		if err := json.Unmarshal(d.Body, &e); err != nil {
			body, human = map[string]any{"error": err.Error()}, err.Error()
			break
		}
		body = e
		human = fmt.Sprintf("%s %s %s", e.Time.UTC().Format(time.RFC3339), e.Severity, oneLine(e.Summary))
	}
	if p.json {
		b, err := json.Marshal(map[string]any{"routing_key": d.RoutingKey, "stream": stream, "seq": seq, "body": body})
		if err != nil {
			return
		}
		p.w.Write(append(b, '\n'))
		return
	}
	fmt.Fprintf(p.w, "%s seq=%d %s\n", d.RoutingKey, seq, human)
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
}
