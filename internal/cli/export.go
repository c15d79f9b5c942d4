package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/export"
)

func init() {
	register(Command{Name: "export", Summary: "write series from a vigil server to a CSV or Parquet file", Run: runExport})
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	srv := serverFlag(fs)
	match := fs.String("match", "", "series selector, e.g. node_load1 or '{__name__=~\"node_cpu.*\",node=~\"cn0.*\"}' (required)")
	from := fs.String("from", "now-1h", "start: RFC 3339, Unix seconds or now-DURATION")
	to := fs.String("to", "now", "end: RFC 3339, Unix seconds or now-DURATION")
	step := fs.Duration("step", export.DefaultStep, "row spacing; a cell holds the series' last sample in (t-step, t]")
	format := fs.String("format", "", "csv or parquet (default: from the --out extension, else csv)")
	out := fs.String("out", "", "output file, written only if the export succeeds; - for stdout (required)")
	progress := fs.Bool("progress", false, "print progress on stderr even when it is not a terminal")
	timeout := fs.Duration("timeout", 0, "give up after this long (default: no limit, but "+apiclient.DefaultTimeout.String()+" per request)")
	httpConfig := httpConfigFlag(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vigil export --match SELECTOR --out FILE [--from T] [--to T] [--format csv|parquet] [--step DUR] [--server URL] [--http-config FILE]")
		fmt.Fprintln(stderr, "\nOne row per (time, node), one column per series: the metric name with its labels")
		fmt.Fprintln(stderr, "other than node, e.g. node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"}.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	usage := func(err error) error { return &ExitError{Code: 2, Err: err} }
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	case *match == "":
		return usage(errors.New("--match is required"))
	case *out == "":
		return usage(errors.New("--out is required"))
	case *step <= 0:
		return usage(errors.New("--step must be positive"))
	}
	f := strings.ToLower(*format)
	if f == "" {
		f = export.CSV
		if strings.EqualFold(filepath.Ext(*out), ".parquet") {
			f = export.Parquet
		}
	}
	now := time.Now()
	start, err := export.ParseTime(*from, now)
	if err != nil {
		return usage(fmt.Errorf("--from: %w", err))
	}
	end, err := export.ParseTime(*to, now)
	if err != nil {
		return usage(fmt.Errorf("--to: %w", err))
	}
	hc, err := apiHTTPClient(*httpConfig)
	if err != nil {
		return err
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	o := export.Options{
		Server: *srv, HTTP: hc, Timeout: *timeout, Match: *match, From: start, To: end, Step: *step,
		Format: f, Out: *out, Stdout: stdout,
	}
	if tty := exportTTY(stderr); tty || *progress {
		o.Progress, o.TTY = stderr, tty
	}
	sum, err := export.Run(ctx, o)
	if err != nil {
		return err
	}
	if *out != "-" {
		fmt.Fprintf(stderr, "wrote %d rows × %d columns (%d series of %d nodes) to %s in %s\n",
			sum.Rows, sum.Columns, sum.Series, sum.Nodes, *out, sum.Elapsed.Round(time.Millisecond))
	}
	return nil
}

// exportTTY reports whether w is a character device (a terminal).
func exportTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
