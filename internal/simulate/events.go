package simulate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// JobEvent is a job the scheduler started (Start) or ended.
type JobEvent struct {
	Start bool
	Job   SimJob
}

// EventOptions configure NewEventSender.
type EventOptions struct {
	// Server is the base URL of a vigil server run with --job-events.
	Server  string
	Queue   int           // events waiting to be posted (0: 4096); more are dropped
	Timeout time.Duration // per request (0: 2s)
	Log     *slog.Logger
}

// EventSender posts the simulated scheduler's job starts and ends to a
// server's POST /api/v1/jobs/{id}/event, as Slurm's prolog and epilog
// hooks would, so the server's job index has their metadata. Send never
// blocks (the scheduler calls it under its lock, in the nodes' ticks): a
// full queue drops the event.
type EventSender struct {
	base    string
	timeout time.Duration
	client  *http.Client
	log     *slog.Logger
	q       chan JobEvent

	sent, dropped, failed atomic.Uint64
}

// NewEventSender checks o; Run posts what Send queues.
func NewEventSender(o EventOptions) (*EventSender, error) {
	u, err := url.Parse(o.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("job events server %q: want http://host:port", o.Server)
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &EventSender{
		base:    strings.TrimSuffix(u.String(), "/"),
		timeout: o.Timeout,
		client:  &http.Client{Timeout: o.Timeout},
		log:     o.Log.With("component", "simulate", "job_events", u.Redacted()),
		q:       make(chan JobEvent, o.Queue),
	}, nil
}

// Send queues ev without blocking; it reports false if the queue was full.
func (e *EventSender) Send(ev JobEvent) bool {
	select {
	case e.q <- ev:
		return true
	default:
	}
	if e.dropped.Add(1) == 1 { // logged once; Run logs the total
		e.log.Warn("job event queue full: dropping events (the server is slow or down)", "queue", cap(e.q))
	}
	return false
}

// Sent, Dropped and Failed count events posted (2xx), dropped on a full
// queue and not accepted by the server.
func (e *EventSender) Sent() uint64    { return e.sent.Load() }
func (e *EventSender) Dropped() uint64 { return e.dropped.Load() }
func (e *EventSender) Failed() uint64  { return e.failed.Load() }

// Run posts queued events in order until ctx is done; a failed post is
// counted, not retried (the next event of the job carries its metadata
// again).
func (e *EventSender) Run(ctx context.Context) error {
	var lastErr string
	defer func() {
		e.log.Info("job events", "sent", e.sent.Load(), "dropped", e.dropped.Load(), "failed", e.failed.Load())
	}()
	for {
		var ev JobEvent
		select {
		case <-ctx.Done():
			return nil
		case ev = <-e.q:
		}
		err := e.post(ctx, ev)
		if err == nil {
			e.sent.Add(1)
			if lastErr != "" {
				e.log.Info("job events: posting again")
				lastErr = ""
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		e.failed.Add(1)
		// Log a new kind of failure once, not every event of an outage.
		s := err.Error()
		if ue, ok := err.(*url.Error); ok {
			s = ue.Err.Error() // without the job's URL
		}
		if s != lastErr {
			e.log.Warn("job event not posted", "job", ev.Job.ID, "err", err)
			lastErr = s
		}
	}
}

func (e *EventSender) post(ctx context.Context, ev JobEvent) error {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/api/v1/jobs/"+url.PathEscape(ev.Job.ID)+"/event",
		strings.NewReader(EventForm(ev).Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return errors.New(resp.Status + ": " + strings.TrimSpace(string(body)))
	}
	return nil
}

// EventForm is ev as the server's event API takes it: the job's metadata
// in both events (a dropped start loses nothing the end cannot give).
func EventForm(ev JobEvent) url.Values {
	j := ev.Job
	f := url.Values{}
	set := func(k, v string) {
		if v != "" {
			f.Set(k, v)
		}
	}
	at := j.Start
	if ev.Start {
		f.Set("event", "start")
	} else {
		f.Set("event", "end")
		at = j.End
		f.Set("exit_code", strconv.Itoa(j.ExitCode))
		set("state", j.State)
	}
	if !at.IsZero() {
		f.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	set("user", j.User)
	set("account", j.Account)
	set("partition", j.Partition)
	set("name", j.Name)
	set("nodes", Hostlist(j.Nodes))
	if j.CPUs > 0 {
		f.Set("cpus", strconv.Itoa(j.CPUs))
	}
	if j.MemBytes > 0 {
		f.Set("mem_bytes", strconv.FormatInt(j.MemBytes, 10))
	}
	if s := int64(j.TimeLimit / time.Second); s > 0 {
		f.Set("time_limit", strconv.FormatInt(s, 10))
	}
	return f
}

// Hostlist writes names as a Slurm host list, runs of consecutive numbers
// with the same prefix and width folded into ranges: cn00001,cn00002,
// cn00003,cn00007 is cn[00001-00003,00007]. Names without a trailing
// number stay as they are.
func Hostlist(names []string) string {
	var b strings.Builder
	for i := 0; i < len(names); {
		pre, num, w, ok := splitNum(names[i])
		if !ok {
			sep(&b)
			b.WriteString(names[i])
			i++
			continue
		}
		// Items of this prefix and width, as ranges.
		sep(&b)
		b.WriteString(pre)
		b.WriteByte('[')
		first := true
		for i < len(names) {
			p, n, nw, ok := splitNum(names[i])
			if !ok || p != pre || nw != w || (!first && n <= num) {
				break
			}
			lo, hi := n, n
			i++
			for i < len(names) {
				p2, n2, w2, ok2 := splitNum(names[i])
				if !ok2 || p2 != pre || w2 != w || n2 != hi+1 {
					break
				}
				hi = n2
				i++
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			writePadded(&b, lo, w)
			if hi > lo {
				b.WriteByte('-')
				writePadded(&b, hi, w)
			}
			num = hi
		}
		b.WriteByte(']')
	}
	return b.String()
}

func sep(b *strings.Builder) {
	if b.Len() > 0 {
		b.WriteByte(',')
	}
}

// splitNum splits "cn00042" into "cn", 42 and width 5.
func splitNum(s string) (prefix string, n uint64, width int, ok bool) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i == len(s) || len(s)-i > 9 || strings.ContainsAny(s[:i], "[],") {
		return "", 0, 0, false
	}
	n, err := strconv.ParseUint(s[i:], 10, 64)
	return s[:i], n, len(s) - i, err == nil
}

func writePadded(b *strings.Builder, n uint64, w int) {
	s := strconv.FormatUint(n, 10)
	for range w - len(s) {
		b.WriteByte('0')
	}
	b.WriteString(s)
}
