package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/query"
)

func init() {
	register(Command{Name: "query", Summary: "run a PromQL query against a vigil server and print a table", Run: runQuery})
}

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	srv := serverFlag(fs)
	rng := fs.Duration("range", 0, "run a range query over this much time before --time (e.g. 10m)")
	step := fs.Duration("step", 0, "resolution of a range query (default: range/30, at least 1s)")
	at := fs.String("time", "", "evaluation time (Unix seconds or RFC 3339; default now)")
	raw := fs.Bool("json", false, "print the server's JSON answer unchanged")
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up after this long")
	httpConfig := httpConfigFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vigil query EXPR [--server URL] [--range DUR [--step DUR]] [--time T] [--json] [--http-config FILE]\n\nFlags:")
		fs.PrintDefaults()
	}
	// Flags may come before or after EXPR.
	var expr string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if expr != "" {
			return &ExitError{Code: 2, Err: fmt.Errorf("more than one expression: %q and %q", expr, fs.Arg(0))}
		}
		expr, args = fs.Arg(0), fs.Args()[1:]
	}
	if expr == "" {
		fs.Usage()
		return &ExitError{Code: 2, Err: errors.New("no expression given")}
	}
	if *rng < 0 || *step < 0 {
		return &ExitError{Code: 2, Err: errors.New("--range and --step must not be negative")}
	}
	end := time.Now()
	if *at != "" {
		t, err := query.ParseTime(*at)
		if err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("--time: %w", err)}
		}
		end = t
	}
	if *timeout <= 0 {
		return &ExitError{Code: 2, Err: errors.New("--timeout must be positive")}
	}
	hc, err := apiHTTPClient(*httpConfig)
	if err != nil {
		return err
	}
	// One request: the client's timeout is the command's.
	c := &query.Client{Server: *srv, HTTP: hc, Timeout: *timeout}
	var resp *query.Response
	if *rng > 0 {
		st := *step
		if st == 0 {
			st = max(*rng/30, time.Second)
		}
		resp, err = c.Range(ctx, expr, end.Add(-*rng), end, st)
	} else {
		resp, err = c.Instant(ctx, expr, end)
	}
	if *raw && resp != nil {
		if _, werr := fmt.Fprintln(stdout, string(resp.Raw)); werr != nil {
			return werr
		}
	}
	if err != nil {
		return err
	}
	if *raw {
		return nil
	}
	return query.WriteTable(stdout, resp)
}
