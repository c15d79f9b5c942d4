// Command vigil-sampler is the lean node daemon that `vigil sampler` runs:
// it links only the sampler, so it starts small on compute nodes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/samplerd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	switch {
	case err == nil, err == flag.ErrHelp:
	default:
		fmt.Fprintf(os.Stderr, "vigil sampler: %v\n", err)
		os.Exit(1)
	}
}

// run wires the daemon as internal/cli's runSampler does: file, flags over
// it, validation, New, Run.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sampler", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	c, err := config.ParseFlags(fs, args, samplerd.ConfigUsage, samplerd.FromFile)
	if err != nil {
		return err
	}
	if c.SampleConfig {
		_, err := io.WriteString(os.Stdout, samplerd.SampleConfig())
		return err
	}
	log, err := logging.New(os.Stderr, c.Log)
	if err != nil {
		return err
	}
	d, err := samplerd.New(c, log)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}
