package web_test

import (
	"context"
	"net/http"
	"time"

	"github.com/vigil-hpc/vigil/internal/web"
)

// staticSource is a Source with two nodes and no aggregator tree.
type staticSource struct{}

func (staticSource) NodeValues(ctx context.Context, expr string, t time.Time) (map[string]float64, error) {
	return map[string]float64{"cn00001": 0.25, "cn00002": 0.75}, nil
}

func (staticSource) Nodes(ctx context.Context) ([]web.NodeInfo, error) {
	return []web.NodeInfo{{Name: "cn00001", Up: true}, {Name: "cn00002", Up: true}}, nil
}

func (staticSource) Tree(ctx context.Context) (any, error) { return nil, nil }

// The server mounts the dashboard at / beside its Prometheus API; the app
// calls api/v1/... on the same origin.
func Example() {
	var promAPI http.Handler = http.NotFoundHandler() // the query engine's API in vigil server

	mux := http.NewServeMux()
	mux.Handle("/api/v1/", promAPI)
	mux.Handle("/", web.New(web.Options{Source: staticSource{}, MaxStreams: 32}))
	_ = &http.Server{Addr: ":9090", Handler: mux}
	// Output:
}
