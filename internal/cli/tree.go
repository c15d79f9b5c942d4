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
	"time"

	"github.com/vigil-hpc/vigil/internal/treestatus"
)

func init() {
	register(Command{Name: "tree", Summary: "show the aggregation tree as it is now (tree status)", Run: runTree})
}

// DefaultServerURL is where client commands find `vigil server`.
const DefaultServerURL = "http://127.0.0.1:9090"

func runTree(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		return &ExitError{Code: 2, Err: errors.New("usage: vigil tree status [--server URL] [--json]")}
	}
	fs := flag.NewFlagSet("tree status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", DefaultServerURL, "vigil server URL")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	tree, err := treestatus.Build(ctx, httpInstant(*server))
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(tree)
	}
	printTree(stdout, *server, tree)
	return nil
}

// httpInstant evaluates instant queries against a Prometheus-compatible API.
func httpInstant(server string) treestatus.QueryFunc {
	return func(ctx context.Context, expr string) ([]treestatus.Sample, error) {
		u := strings.TrimSuffix(server, "/") + "/api/v1/query?query=" + url.QueryEscape(expr)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		c := http.Client{Timeout: 30 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", server, err)
		}
		defer resp.Body.Close()
		var v struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Value  [2]any            `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v); err != nil {
			return nil, fmt.Errorf("query %s: bad response (HTTP %d): %w", server, resp.StatusCode, err)
		}
		if v.Status != "success" {
			return nil, fmt.Errorf("query %q: %s", expr, v.Error)
		}
		out := make([]treestatus.Sample, 0, len(v.Data.Result))
		for _, r := range v.Data.Result {
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
