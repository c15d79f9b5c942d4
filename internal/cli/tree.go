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
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/apiclient"
	"github.com/vigil-hpc/vigil/internal/treestatus"
)

func init() {
	register(Command{Name: "tree", Summary: "show the aggregation tree as it is now (tree status)", Run: runTree})
}

func runTree(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		return &ExitError{Code: 2, Err: errors.New("usage: vigil tree status [--server URL] [--json] [--http-config FILE]")}
	}
	fs := flag.NewFlagSet("tree status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := serverFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	timeout := fs.Duration("timeout", apiclient.DefaultTimeout, "give up on a request after this long")
	httpConfig := httpConfigFlag(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	c, err := newAPIClient(*server, *httpConfig, *timeout)
	if err != nil {
		return err
	}
	tree, err := treestatus.Build(ctx, apiInstant(c))
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(tree)
	}
	printTree(stdout, *server, tree)
	return nil
}

// apiInstant evaluates instant queries against a Prometheus-compatible API.
func apiInstant(c *apiclient.Client) treestatus.QueryFunc {
	return func(ctx context.Context, expr string) ([]treestatus.Sample, error) {
		var v struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		if err := c.Query(ctx, "/api/v1/query", url.Values{"query": {expr}}, &v); err != nil {
			return nil, fmt.Errorf("query %q: %w", expr, err)
		}
		out := make([]treestatus.Sample, 0, len(v.Result))
		for _, r := range v.Result {
			s, _ := r.Value[1].(string)
			f, _ := strconv.ParseFloat(s, 64)
			out = append(out, treestatus.Sample{Labels: r.Metric, Value: f})
		}
		return out, nil
	}
}

func printTree(w io.Writer, server string, t *treestatus.Tree) {
	// A URL may carry basic-auth credentials (--web-config); never print them.
	if u, err := url.Parse(server); err == nil {
		server = u.Redacted()
	}
	fmt.Fprintf(w, "server %s: %d nodes up, %d down, %d aggregators\n", server, t.NodesUp, t.NodesDown, t.Aggregators)
	if len(t.Down) > 0 {
		more := ""
		if n := t.NodesDown - len(t.Down); n > 0 {
			more = fmt.Sprintf(" … and %d more", n)
		}
		fmt.Fprintf(w, "DOWN: %s%s\n", strings.Join(t.DownRanges, " "), more)
	}
	printClockSkew(w, t)
	var walk func(list []*treestatus.Aggregator, indent string)
	walk = func(list []*treestatus.Aggregator, indent string) {
		for i, a := range list {
			branch, next := "├── ", "│   "
			if i == len(list)-1 {
				branch, next = "└── ", "    "
			}
			state := "up"
			if !a.Up {
				state = "DOWN"
			}
			upstream := "upstream ok"
			if !a.UpstreamConnected {
				upstream = "UPSTREAM LOST"
			}
			fmt.Fprintf(w, "%s%s%s [%s] listen %s, %s, children %.0f up / %.0f down, lag %.3fs, received %.0f, dropped %.0f\n",
				indent, branch, a.Name, state, a.Listen, upstream, a.ChildrenUp, a.ChildrenDown, a.LagSeconds, a.ValuesReceived, a.ValuesDropped)
			walk(a.Children, indent+next)
		}
	}
	walk(t.Children, "")
}

// printClockSkew lists the nodes whose clocks are off: their ticks are
// refused (ahead) or land at the wrong time (behind).
func printClockSkew(w io.Writer, t *treestatus.Tree) {
	if t.NodesClockSkew == 0 {
		return
	}
	fmt.Fprintf(w, "CLOCK SKEW: %d nodes (ticks refused or misplaced; fix their clocks)\n", t.NodesClockSkew)
	for _, n := range t.ClockSkew {
		d := time.Duration(n.OffsetSeconds * float64(time.Second)).Round(time.Second)
		dir := "ahead"
		if d < 0 {
			d, dir = -d, "behind"
		}
		fmt.Fprintf(w, "  %s [clock skew] %s %s\n", n.Node, d, dir)
	}
	if more := t.NodesClockSkew - len(t.ClockSkew); more > 0 {
		fmt.Fprintf(w, "  … and %d more\n", more)
	}
}
