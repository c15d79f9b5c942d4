package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/iorecords"
)

func init() {
	register(Command{Name: "io", Summary: "application I/O from the per-file record store (io top: the files and jobs doing the most I/O)", Run: runIO})
}

const ioUsage = "usage: vigil io top [--job JOBID] [--by bytes|calls|time] [--since DUR] [--limit N] [--json] [--server URL]"

func runIO(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &ExitError{Code: 2, Err: errors.New(ioUsage)}
	}
	switch args[0] {
	case "top":
		return runIOTop(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, ioUsage)
		return flag.ErrHelp
	}
	return &ExitError{Code: 2, Err: fmt.Errorf("unknown subcommand %q\n%s", args[0], ioUsage)}
}

func runIOTop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil io top", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, ioUsage); fs.PrintDefaults() }
	server := serverFlag(fs)
	httpConfig := httpConfigFlag(fs)
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up after this long")
	job := fs.String("job", "", "only this job's files (Slurm job ID)")
	by := fs.String("by", "bytes", "rank by bytes (read + written), calls (reads, writes, metadata) or time (in those calls)")
	since := fs.String("since", "5m", "the window: this long back from now (1m, 1h, 7d)")
	limit := fs.Int("limit", 20, fmt.Sprintf("list at most `N` files and N jobs (1 to %d)", iorecords.MaxLimit))
	asJSON := fs.Bool("json", false, "print the API's answer (data) as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), ioUsage)}
	}
	q := url.Values{}
	q.Set("by", *by)
	q.Set("since", *since)
	q.Set("limit", strconv.Itoa(*limit))
	jobSet := false
	fs.Visit(func(f *flag.Flag) { jobSet = jobSet || f.Name == "job" })
	if jobSet {
		q.Set("job", *job)
	}
	// The server checks the same way; a mistake is a usage error here.
	if _, err := iorecords.ParseQuery(q.Get, q.Has, time.Now(), 1<<62); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	c, err := newAPIClient(*server, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	var resp struct {
		Data json.RawMessage `json:"data"`
	}
	if err := c.GetJSON(ctx, iorecords.PathTop, q, &resp); err != nil {
		return err
	}
	if *asJSON {
		_, err := fmt.Fprintf(stdout, "%s\n", resp.Data)
		return err
	}
	var top iorecords.TopJSON
	if err := json.Unmarshal(resp.Data, &top); err != nil {
		return fmt.Errorf("answer of %s: %w", iorecords.PathTop, err)
	}
	return printIOTop(stdout, &top)
}

// printIOTop writes the top files, then the top jobs, as tables.
func printIOTop(w io.Writer, t *iorecords.TopJSON) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "top files by %s, %s to %s (%d records)\n", t.By, t.Start.Local().Format(time.DateTime), t.End.Local().Format(time.DateTime), t.Records)
	fmt.Fprintln(tw, "FILE\tJOB\tNODE\tREAD\tWRITTEN\tREADS\tWRITES\tMETA OPS\tTIME")
	for _, f := range t.Files {
		path := f.Path
		if path == "" {
			path = "(other files)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", path, orDash(f.Job), f.Node, ioBytes(f.BytesRead), ioBytes(f.BytesWritten),
			f.Reads, f.Writes, f.MetaOps, ioSeconds(f.Seconds))
	}
	if len(t.Files) == 0 {
		fmt.Fprintln(tw, "(no records in the window)")
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "top jobs by %s\n", t.By)
	fmt.Fprintln(tw, "JOB\tFILES\tNODES\tREAD\tWRITTEN\tREADS\tWRITES\tMETA OPS\tTIME")
	for _, j := range t.Jobs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\n", orDash(j.Job), j.Files, j.Nodes, ioBytes(j.BytesRead), ioBytes(j.BytesWritten),
			j.Reads, j.Writes, j.MetaOps, ioSeconds(j.Seconds))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ioBytes is a byte count in binary units, exact below 1 KiB.
func ioBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 5 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[u-1])
}

func ioSeconds(s float64) string {
	return (time.Duration(s * 1e9)).Round(time.Millisecond).String()
}
