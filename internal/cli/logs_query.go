package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/logs/logstore"
	"github.com/vigil-hpc/vigil/internal/logs/logsvc"
)

// Client side of the log API: vigil logs search, tail and patterns.

// parseInterleaved parses flags that may come before, between or after the
// query words, and returns the words.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return words, nil
		}
		if rest[0] == "--" {
			return append(words, rest[1:]...), nil
		}
		words = append(words, rest[0])
		args = rest[1:]
	}
}

// joinQuery turns words back into one query, quoting words with spaces the
// shell unquoted ('vigil logs search "disk full"').
func joinQuery(words []string) string {
	parts := make([]string, len(words))
	for i, w := range words {
		if strings.ContainsAny(w, " \t") && !strings.Contains(w, `"`) {
			w = `"` + w + `"`
		}
		parts[i] = w
	}
	return strings.Join(parts, " ")
}

// logFilters are the flags shared by search and tail.
type logFilters struct {
	server     *string
	httpConfig *string
	timeout    time.Duration
	since      time.Duration
	asJSON     bool
	limit      int
}

func (f *logFilters) register(fs *flag.FlagSet, defLimit int) {
	f.server = serverFlag(fs)
	f.httpConfig = httpConfigFlag(fs)
	fs.DurationVar(&f.timeout, "timeout", apiclient.DefaultTimeout, "give up on a request after this long (tail -f: reconnect after this long without data)")
	fs.DurationVar(&f.since, "since", 0, "only messages of the last `DUR` (e.g. 1h)")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object per message")
	fs.IntVar(&f.limit, "limit", defLimit, "print at most `N` messages")
}

// checkQuery validates the query locally for a quicker, clearer error.
func checkQuery(q string) error {
	if _, err := logstore.ParseQuery(q); err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("query: %w", err)}
	}
	return nil
}

func (f *logFilters) client() (*apiclient.Client, error) {
	return newAPIClient(*f.server, *f.httpConfig, f.timeout)
}

// fetchNewest returns up to limit records matching q, newest first.
func fetchNewest(ctx context.Context, c *apiclient.Client, f *logFilters, q string) ([]logsvc.Record, error) {
	var out []logsvc.Record
	cursor := ""
	for len(out) < f.limit {
		v := url.Values{"q": {q}, "limit": {strconv.Itoa(min(f.limit-len(out), 10000))}}
		if f.since > 0 {
			v.Set("since", f.since.String())
		}
		if cursor != "" {
			v.Set("cursor", cursor)
		}
		var r logsvc.SearchResponse
		if err := c.GetJSON(ctx, logsvc.Prefix+"/search", v, &r); err != nil {
			return nil, err
		}
		out = append(out, r.Records...)
		if r.NextCursor == "" {
			break
		}
		cursor = r.NextCursor
	}
	return out, nil
}

func printRecord(w io.Writer, r *logsvc.Record, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	app := r.App
	if r.ProcID != "" {
		app += "[" + r.ProcID + "]"
	}
	if app == "" {
		app = "-"
	}
	mark := ""
	if r.Malformed {
		mark = " (raw)"
	}
	_, err := fmt.Fprintf(w, "%s %s %s %s%s: %s\n", r.Time.Local().Format(time.RFC3339), r.Host, app, r.Severity, mark, r.Text)
	return err
}

// logsSearch runs "vigil logs search QUERY": newest first.
func logsSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("logs search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f logFilters
	f.register(fs, 100)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: vigil logs search [flags] QUERY...

QUERY words: host:GLOB app:GLOB severity:LEVEL (that level or worse)
pattern:ID, and text words or "quoted phrases" that must all occur.
Example: vigil logs search host:cn01* app:sshd severity:warning '"authentication failure"'`)
		fs.PrintDefaults()
	}
	words, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if f.limit <= 0 {
		return &ExitError{Code: 2, Err: errors.New("--limit must be positive")}
	}
	q := joinQuery(words)
	if err := checkQuery(q); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	recs, err := fetchNewest(ctx, c, &f, q)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(stdout)
	for i := range recs {
		if err := printRecord(bw, &recs[i], f.asJSON); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// logsTail runs "vigil logs tail [-f] QUERY": the last --limit messages,
// oldest first, then with -f new ones as they arrive (server-sent events,
// resumed after a dropped connection).
func logsTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("logs tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f logFilters
	f.register(fs, 10)
	follow := fs.Bool("f", false, "follow: print new messages as they arrive")
	fs.BoolVar(follow, "follow", false, "same as -f")
	words, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	q := joinQuery(words)
	if err := checkQuery(q); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var last uint64
	if f.limit > 0 {
		recs, err := fetchNewest(ctx, c, &f, q)
		if err != nil {
			return err
		}
		for i := len(recs) - 1; i >= 0; i-- {
			if err := printRecord(stdout, &recs[i], f.asJSON); err != nil {
				return err
			}
		}
		if len(recs) > 0 {
			last = recs[0].Seq
		}
	}
	if !*follow {
		return nil
	}
	if last == 0 {
		// Start at the newest record, whatever matches.
		var st logsvc.Stats
		if err := c.GetJSON(ctx, logsvc.Prefix+"/stats", nil, &st); err != nil {
			return err
		}
		last = st.Store.LastSeq
	}
	return apiclient.Follow(ctx, "vigil logs tail", stderr, func() error { return followOnce(ctx, c, q, &last, stdout, f.asJSON) })
}

// followOnce reads one event stream, advancing *last past each record.
func followOnce(ctx context.Context, c *apiclient.Client, q string, last *uint64, w io.Writer, asJSON bool) error {
	v := url.Values{"q": {q}, "after": {strconv.FormatUint(*last, 10)}}
	body, err := c.Stream(ctx, logsvc.Prefix+"/tail", v)
	if err != nil {
		return err
	}
	defer body.Close()
	return apiclient.ReadEvents(body, func(data []byte) error {
		var r logsvc.Record
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("tail: bad event: %w", err)
		}
		*last = r.Seq
		return printRecord(w, &r, asJSON)
	})
}

// logsPatterns runs "vigil logs patterns": mined patterns with counts.
func logsPatterns(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("logs patterns", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := serverFlag(fs)
	httpConfig := httpConfigFlag(fs)
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up after this long")
	asJSON := fs.Bool("json", false, "print the server's JSON answer")
	limit := fs.Int("limit", 50, "print at most `N` patterns")
	sortBy := fs.String("sort", "count", "order: count, recent (last seen) or new (first seen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	c, err := newAPIClient(*server, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	v := url.Values{"limit": {strconv.Itoa(*limit)}, "sort": {*sortBy}}
	var r logsvc.PatternsResponse
	if err := c.GetJSON(ctx, logsvc.Prefix+"/patterns", v, &r); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCOUNT\tLAST HOUR\tLAST SEEN\tHOSTS\tTEMPLATE")
	for _, p := range r.Patterns {
		var hour uint64
		for _, c := range p.PerMinute.Counts {
			hour += uint64(c)
		}
		hosts := strconv.Itoa(len(p.Hosts))
		if p.HostsOverflow > 0 {
			hosts += "+"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\n", p.ID, p.Count, hour, p.LastSeen.Local().Format(time.DateTime), hosts, p.Template)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Total > len(r.Patterns) {
		fmt.Fprintf(stdout, "(%d of %d patterns; --limit for more)\n", len(r.Patterns), r.Total)
	}
	return nil
}

func init() {
	wrap := func(f func(context.Context, []string, io.Writer, io.Writer) error) func(context.Context, []string, io.Reader, io.Writer, io.Writer) error {
		return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
			return f(ctx, args, stdout, stderr)
		}
	}
	logsSubs["search"] = logsSub{summary: "search stored messages: QUERY [--since DUR] [--server URL] [--json]", run: wrap(logsSearch)}
	logsSubs["tail"] = logsSub{summary: "print the newest messages; -f follows new ones", run: wrap(logsTail)}
	logsSubs["patterns"] = logsSub{summary: "list mined patterns with counts [--server URL] [--json]", run: wrap(logsPatterns)}
}
