package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/jobs/report"
)

// reportTimeout is the default wait for a report: the server reads the
// whole job's samples, a day of a thousand nodes included.
const reportTimeout = time.Minute

// runJobReport is `vigil job report JOBID`: the server's report of a job as
// text like jobstats, or its JSON with --json.
func runJobReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil job report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	srv := serverFlag(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	timeout := fs.Duration("timeout", reportTimeout, "give up after this long")
	httpConfig := httpConfigFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vigil job report JOBID [--server URL] [--json] [--http-config FILE]\n\nFlags:")
		fs.PrintDefaults()
	}
	// Flags may come before or after JOBID.
	var id string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if id != "" {
			return &ExitError{Code: 2, Err: fmt.Errorf("more than one job id: %q and %q", id, fs.Arg(0))}
		}
		id, args = fs.Arg(0), fs.Args()[1:]
	}
	if id == "" {
		fs.Usage()
		return &ExitError{Code: 2, Err: errors.New("no job id given")}
	}
	if *timeout <= 0 {
		return &ExitError{Code: 2, Err: errors.New("--timeout must be positive")}
	}
	c, err := newAPIClient(*srv, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	err = c.GetJSON(ctx, "/api/v1/jobs/"+url.PathEscape(id)+"/report", nil, &env)
	var ae *apiclient.Error
	if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		return &ExitError{Code: 1, Err: fmt.Errorf("no such job %q", id)}
	}
	if err != nil {
		return err
	}
	if *asJSON {
		var b bytes.Buffer
		if err := json.Indent(&b, env.Data, "", "  "); err != nil {
			return fmt.Errorf("report of job %s is not JSON: %w", id, err)
		}
		b.WriteByte('\n')
		_, err := b.WriteTo(stdout)
		return err
	}
	var r report.Report
	if err := json.Unmarshal(env.Data, &r); err != nil {
		return fmt.Errorf("report of job %s is not the expected JSON: %w", id, err)
	}
	return report.WriteText(stdout, &r)
}
