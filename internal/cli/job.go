package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/jobs"
)

func init() {
	register(Command{Name: "job", Summary: "list the Slurm jobs the server knows, or report on one (job list, job report ID)", Run: runJob})
}

const jobUsage = "usage: vigil job list [--user U] [--state S] [--partition P] [--since DUR] [--limit N] [--server URL] [--json]\n" +
	"       vigil job show JOBID [--server URL]\n" +
	"       vigil job report JOBID [--server URL] [--json]"

func runJob(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &ExitError{Code: 2, Err: errors.New(jobUsage)}
	}
	switch args[0] {
	case "list":
		return runJobList(ctx, args[1:], stdout, stderr)
	case "show":
		return runJobShow(ctx, args[1:], stdout, stderr)
	case "report":
		return runJobReport(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, jobUsage)
		return flag.ErrHelp
	}
	return &ExitError{Code: 2, Err: fmt.Errorf("unknown subcommand %q\n%s", args[0], jobUsage)}
}

func runJobList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil job list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := serverFlag(fs)
	user := fs.String("user", "", "only this user's jobs")
	state := fs.String("state", "", "only jobs in this state: running, pending, ended (any that is over), completed, failed, cancelled, timeout, oom, node_fail")
	partition := fs.String("partition", "", "only jobs in this partition")
	since := fs.String("since", "", "only jobs not over before this long ago (e.g. 7d)")
	limit := fs.Int("limit", 0, "at most this many jobs, newest first (default 1000, at most 100000)")
	asJSON := fs.Bool("json", false, "print the jobs as JSON")
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up after this long")
	httpConfig := httpConfigFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), jobUsage)}
	}
	q := url.Values{}
	for k, v := range map[string]string{"user": *user, "state": *state, "partition": *partition} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *since != "" {
		if _, err := duration.Parse(*since); err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("--since: %w", err)}
		}
		q.Set("since", *since)
	}
	if *limit < 0 || *limit > jobs.MaxLimit {
		return &ExitError{Code: 2, Err: fmt.Errorf("--limit: want 1 to %d", jobs.MaxLimit)}
	}
	if *limit > 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	c, err := newAPIClient(*server, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	var resp struct {
		Data []jobs.Job `json:"data"`
	}
	if err := c.GetJSON(ctx, "/api/v1/jobs", q, &resp); err != nil {
		return err
	}
	if *asJSON {
		if resp.Data == nil {
			resp.Data = []jobs.Job{}
		}
		return json.NewEncoder(stdout).Encode(resp.Data)
	}
	return writeJobTable(stdout, resp.Data, time.Now())
}

// runJobShow prints what the index holds of one job, as JSON.
func runJobShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil job show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := serverFlag(fs)
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up after this long")
	httpConfig := httpConfigFlag(fs)
	id, err := parseJobArgs(fs, args)
	if err != nil {
		return err
	}
	c, err := newAPIClient(*server, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	var resp struct {
		Data jobs.Job `json:"data"`
	}
	if err := c.GetJSON(ctx, "/api/v1/jobs/"+url.PathEscape(id), nil, &resp); err != nil {
		return noSuchJob(id, err)
	}
	e := json.NewEncoder(stdout)
	e.SetIndent("", "  ")
	return e.Encode(resp.Data)
}

// parseJobArgs parses fs with one JOBID among the flags.
func parseJobArgs(fs *flag.FlagSet, args []string) (string, error) {
	var id string
	for {
		if err := fs.Parse(args); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		if id != "" {
			return "", &ExitError{Code: 2, Err: fmt.Errorf("more than one job id: %q and %q", id, fs.Arg(0))}
		}
		id, args = fs.Arg(0), fs.Args()[1:]
	}
	if id == "" {
		return "", &ExitError{Code: 2, Err: errors.New("no job id given\n" + jobUsage)}
	}
	if !jobs.ValidID(id) {
		return "", &ExitError{Code: 2, Err: fmt.Errorf("job id %.70q: want digits, optionally _TASK", id)}
	}
	return id, nil
}

// writeJobTable prints jobs as squeue-like columns.
func writeJobTable(w io.Writer, js []jobs.Job, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUSER\tPARTITION\tSTATE\tNODES\tSTART\tELAPSED")
	for _, j := range js {
		start, elapsed := "-", "-"
		if !j.Start.IsZero() {
			start = j.Start.Local().Format("2006-01-02 15:04:05")
			end := j.End
			if end.IsZero() {
				end = now
			}
			elapsed = slurmElapsed(end.Sub(j.Start))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(j.ID), cell(j.User), cell(j.Partition), cell(string(j.State)),
			nodeCell(j.Nodes), start, elapsed)
	}
	return tw.Flush()
}

// cell keeps a table cell on one line and readable (user names may hold
// anything).
func cell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\t' }) {
		q := strconv.Quote(s)
		return q[1 : len(q)-1]
	}
	return s
}

// nodeCell lists a few nodes and counts the rest.
func nodeCell(nodes []string) string {
	switch {
	case len(nodes) == 0:
		return "-"
	case len(nodes) <= 3:
		return cell(strings.Join(nodes, ","))
	}
	return fmt.Sprintf("%s,%s,…(%d)", cell(nodes[0]), cell(nodes[1]), len(nodes))
}

// slurmElapsed writes [D-]HH:MM:SS as Slurm does.
func slurmElapsed(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	days, h, m, sec := s/86400, s/3600%24, s/60%60, s%60
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, sec)
	}
	return fmt.Sprintf("%02d:%02d:%02d", h, m, sec)
}

// noSuchJob turns the server's 404 into the command's "no such job".
func noSuchJob(id string, err error) error {
	var ae *apiclient.Error
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return &ExitError{Code: 1, Err: fmt.Errorf("no such job: %s", id)}
	}
	return err
}
