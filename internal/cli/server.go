package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/server"
)

func init() {
	register(Command{Name: "server", Summary: "store samples and serve the Prometheus query API and remote write", Run: runServer})
}

// runServer is `vigil server`: file, flags over it, validation, New, Run —
// as every daemon.
func runServer(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vigil server [--config FILE] [--http ADDR] [--listen ADDR] [--data DIR] [flags]")
		fmt.Fprintln(stderr, "\nStores samples and serves the Prometheus HTTP API (query, query_range, series,")
		fmt.Fprintln(stderr, "labels, metadata), the dashboard and /metrics on --http (loopback by default;")
		fmt.Fprintln(stderr, "--web-config adds TLS and basic auth), remote write (POST /api/v1/write) with")
		fmt.Fprintln(stderr, "--enable-remote-write-receiver; takes the samplers' or aggregators' stream on --listen.\n\nFlags:")
		fs.PrintDefaults()
	}
	cfg, err := config.ParseFlags(fs, args, "configuration file (TOML, [server] table); optional", server.FromFile)
	if err != nil {
		return err
	}
	log, err := logging.New(stderr, cfg.Log)
	if err != nil {
		return err
	}
	s, err := server.New(*cfg, log)
	if err != nil {
		return err
	}
	return s.Run(ctx)
}
