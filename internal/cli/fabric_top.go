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
	"text/tabwriter"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/fabric"
)

func init() {
	fabricCommands["top"] = Command{Name: "top", Summary: "the worst links now, with the jobs below them", Run: runFabricTop}
}

const fabricTopUsage = "usage: vigil fabric top [--by xmit_wait|errors|bytes] [--limit N] [--window DUR] [--job ID] [--json] [--server URL]"

func runFabricTop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil fabric top", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, fabricTopUsage); fs.PrintDefaults() }
	server := serverFlag(fs)
	httpConfig := httpConfigFlag(fs)
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up after this long")
	by := fs.String("by", fabric.ByXmitWait, "rank links by xmit_wait (transmit wait ticks/s), errors (error counters/s) or bytes (bytes/s both ways)")
	limit := fs.Int("limit", fabric.DefaultTopLimit, fmt.Sprintf("print the worst `N` links (1 to %d)", fabric.MaxTopLimit))
	window := fs.String("window", "1m", "rates over this window (2s to 1h)")
	job := fs.String("job", "", "only the links this job's nodes use")
	asJSON := fs.Bool("json", false, "print the server's answer as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("unexpected argument %q\n%s", fs.Arg(0), fabricTopUsage)}
	}
	q := url.Values{"by": {*by}, "limit": {strconv.Itoa(*limit)}, "window": {*window}}
	if *job != "" {
		q.Set("job", *job)
	}
	// The server checks the same way; a mistake is a usage error here.
	if _, _, err := fabric.ParseParams(q); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	c, err := newAPIClient(*server, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	var resp struct {
		Data fabric.Top `json:"data"`
	}
	if err := c.GetJSON(ctx, fabric.PathTop, q, &resp); err != nil {
		return err
	}
	top := resp.Data
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(top)
	}
	return printFabricTop(stdout, &top)
}

func printFabricTop(w io.Writer, top *fabric.Top) error {
	if len(top.Links) == 0 {
		_, err := fmt.Fprintln(w, "no links: is the ibnet sweep running? (vigil_ib_port_info has no series)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "LINK\tUP\tUTIL\tBYTES/S\tXMIT_WAIT/S\tERRORS/S\tJOBS\n")
	for _, l := range top.Links {
		up := "up"
		if !l.Up {
			up = "DOWN"
		}
		var js []string
		for _, j := range l.Jobs {
			s := j.ID
			if j.User != "" {
				s += "(" + j.User + ")"
			}
			js = append(js, s)
		}
		if more := l.JobCount - len(l.Jobs); more > 0 {
			js = append(js, fmt.Sprintf("+%d more", more))
		}
		if len(js) == 0 {
			js = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%s\t%s\t%s\t%s\n", l.Name, up, 100*l.Utilization, siRate(l.TxBytes+l.RxBytes),
			siRate(l.XmitWait), siRate(l.Errors), strings.Join(js, " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d of %d links by %s over %s at %s\n", len(top.Links), top.Total, top.By, top.Window, top.Time.Format("15:04:05Z07:00"))
	return err
}

// siRate writes a rate with an SI prefix, three significant digits.
func siRate(v float64) string {
	for _, u := range []struct {
		div float64
		sfx string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.div {
			return strconv.FormatFloat(v/u.div, 'g', 3, 64) + u.sfx
		}
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
