package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/events"
)

func init() {
	register(Command{Name: "events", Summary: "list or follow the event stream: node up/down, jobs, alerts, health checks, gaps", Run: runEvents})
}

const eventsUsage = "usage: vigil events [--since DUR|TIME] [--until TIME] [--kind K[,K]] [--node GLOB] [--job ID] [--severity S[,S]] [--limit N] [-f|--follow] [--json] [--server URL]"

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil events", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, eventsUsage); fs.PrintDefaults() }
	server := serverFlag(fs)
	httpConfig := httpConfigFlag(fs)
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up after this long (following: after this long without data)")
	since := fs.String("since", "", "only events at or after this: a duration back from now (15m, 7d), RFC 3339 or Unix seconds")
	until := fs.String("until", "", "only events at or before this (same forms as --since)")
	kind := fs.String("kind", "", "only these kinds, a comma list: node_up, node_down, alert_firing, alert_resolved, health_fail, health_pass, log_new_pattern, job_start, job_end, failover, gap, drain, resume")
	node := fs.String("node", "", "only events of nodes matching this glob (cn*, gpu[0-3])")
	job := fs.String("job", "", "only events of this job ID")
	severity := fs.String("severity", "", "only these severities, a comma list: info, warning, critical")
	limit := fs.Int("limit", events.DefaultLimit, fmt.Sprintf("print at most the newest `N` events (1 to %d)", events.MaxLimit))
	follow := fs.Bool("follow", false, "after the newest events, print new ones as they come until interrupted")
	fs.BoolVar(follow, "f", false, "same as --follow")
	asJSON := fs.Bool("json", false, "print each event as one JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), eventsUsage)}
	}
	if *limit < 1 || *limit > events.MaxLimit {
		return &ExitError{Code: 2, Err: fmt.Errorf("--limit: want 1 to %d", events.MaxLimit)}
	}
	q := url.Values{}
	for k, v := range map[string]string{"since": *since, "until": *until, "kind": *kind, "node": *node, "job": *job, "severity": *severity} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", strconv.Itoa(*limit))
	// The server checks the same way; a mistake is a usage error here.
	if _, err := events.ParseFilter(q, time.Now()); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	c, err := newAPIClient(*server, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	var resp struct {
		Data struct {
			Events []events.Event `json:"events"`
		} `json:"data"`
	}
	if err := c.GetJSON(ctx, events.PathQuery, q, &resp); err != nil {
		return err
	}
	evs := resp.Data.Events
	// Oldest first, so the newest is at the bottom, where following goes on.
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	p := newEventPrinter(stdout, *asJSON)
	for i := range evs {
		p.print(&evs[i])
	}
	if !*follow {
		return p.flush(true)
	}
	if err := p.flush(false); err != nil {
		return err
	}
	// The stream replays what came after the newest event listed (with
	// --since, what matches since then), then goes on live.
	var last uint64
	if len(evs) > 0 {
		last = evs[len(evs)-1].ID
	}
	q.Del("limit")
	return followEvents(ctx, c, q, last, p, stderr)
}

// followEvents reads the live stream, reconnecting after a lost
// connection from the last event seen, until ctx ends.
func followEvents(ctx context.Context, c *apiclient.Client, q url.Values, last uint64, p *eventPrinter, stderr io.Writer) error {
	return apiclient.Follow(ctx, "vigil events", stderr, func() error { return followEventsOnce(ctx, c, q, &last, p) })
}

func followEventsOnce(ctx context.Context, c *apiclient.Client, q url.Values, last *uint64, p *eventPrinter) error {
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	if *last > 0 {
		v.Set("last_event_id", strconv.FormatUint(*last, 10))
	}
	body, err := c.Stream(ctx, events.PathStream, v)
	if err != nil {
		return err
	}
	defer body.Close()
	return apiclient.ReadEvents(body, func(data []byte) error {
		var e events.Event
		if err := json.Unmarshal(data, &e); err != nil {
			return fmt.Errorf("stream: bad event: %w", err)
		}
		if e.ID <= *last {
			return nil
		}
		*last = e.ID
		p.print(&e)
		return p.flush(false)
	})
}

// eventPrinter writes events as a table (TIME SEVERITY KIND NODE JOB
// SUMMARY) or as JSON lines. Column widths are those of the first rows
// flushed and only grow, so followed events line up with the listing.
type eventPrinter struct {
	w      io.Writer
	json   *json.Encoder
	rows   [][6]string
	widths [5]int
	header bool
	err    error
}

var eventHeader = [6]string{"TIME", "SEVERITY", "KIND", "NODE", "JOB", "SUMMARY"}

func newEventPrinter(w io.Writer, asJSON bool) *eventPrinter {
	p := &eventPrinter{w: w}
	if asJSON {
		p.json = json.NewEncoder(w)
	}
	return p
}

func (p *eventPrinter) print(e *events.Event) {
	if p.err != nil {
		return
	}
	if p.json != nil {
		p.err = p.json.Encode(e)
		return
	}
	// cell (job.go) keeps a cell on one line.
	p.rows = append(p.rows, [6]string{e.Time.Local().Format("2006-01-02 15:04:05"),
		cell(e.Severity), cell(e.Kind), eventNodes(e), cell(e.Job), cell(e.Summary)})
}

// eventNodes is the NODE cell: the node, or the first of several and
// their count.
func eventNodes(e *events.Event) string {
	switch {
	case len(e.Nodes) == 0:
		return cell(e.Node)
	case len(e.Nodes) == 1 && e.Node == "":
		return cell(e.Nodes[0])
	}
	first := e.Node
	n := len(e.Nodes)
	if first == "" {
		first = e.Nodes[0]
	} else {
		n++
	}
	return fmt.Sprintf("%s,…(%d)", cell(first), n)
}

// flush writes the rows held, after the header the first time (also
// when there are none, if final).
func (p *eventPrinter) flush(final bool) error {
	if p.err != nil || p.json != nil {
		return p.err
	}
	rows := p.rows
	if !p.header && (len(rows) > 0 || final) {
		rows = append([][6]string{eventHeader}, rows...)
		p.header = true
	}
	for _, r := range rows {
		for i := range p.widths {
			p.widths[i] = max(p.widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i := range p.widths {
			b.WriteString(r[i])
			b.WriteString(strings.Repeat(" ", p.widths[i]-utf8.RuneCountInString(r[i])+2))
		}
		b.WriteString(r[5])
		b.WriteByte('\n')
	}
	p.rows = p.rows[:0]
	_, p.err = io.WriteString(p.w, b.String())
	return p.err
}
