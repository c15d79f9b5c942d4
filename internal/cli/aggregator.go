package cli

import (
	"context"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigil-hpc/vigil/internal/aggregator"
	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/logging"
)

func init() {
	register(Command{Name: "aggregator", Summary: "run a tree aggregator (fan-in, buffering, failover)", Run: runAggregator})
}

// runAggregator is `vigil aggregator`: file, flags over it, validation,
// New, Run — as every daemon.
func runAggregator(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("aggregator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	s, err := config.ParseFlags(fs, args, "configuration file (TOML, [aggregator] table); optional", aggregator.SettingsFromFile)
	if err != nil {
		return err
	}
	log, err := logging.New(stderr, s.Log)
	if err != nil {
		return err
	}
	cfg, err := s.Config(log)
	if err != nil {
		return err
	}
	agg, err := aggregator.New(cfg)
	if err != nil {
		return err
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				agg.Reload()
			}
		}
	}()
	return agg.Run(ctx)
}
