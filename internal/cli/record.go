package cli

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/samplerd"
)

func init() {
	register(Command{Name: "record", Summary: "record this node's samples to a file, for `vigil simulate --replay`", Run: runRecord})
}

// runRecord samples this node on aligned ticks and writes every tick as
// Prometheus text with timestamps (gzip if the name ends in .gz), so that
// simulations and benchmarks can replay real data with its real noise.
func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "file to write (required; .gz compresses)")
	duration := fs.Duration("duration", 10*time.Minute, "how long to record")
	interval := fs.Duration("interval", time.Second, "sampling interval")
	root := fs.String("root", "", "root of /proc and /sys (default \"/\")")
	plugins := fs.String("plugins", "", "comma-separated plugins (default: the default set)")
	var logOpts logging.Options
	logOpts.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("record: unexpected argument %q", fs.Arg(0))
	case *out == "":
		return errors.New("record: --out FILE is required")
	case *interval < time.Millisecond:
		return fmt.Errorf("record: --interval %s: must be at least 1ms", *interval)
	case *duration < *interval:
		return fmt.Errorf("record: --duration %s: shorter than one interval", *duration)
	}
	log, err := logging.New(stderr, logOpts)
	if err != nil {
		return err
	}
	o := &samplerd.Options{Config: config.Defaults(), Root: *root, Interval: *interval, Plugins: sampler.DefaultNames()}
	if *plugins != "" {
		o.Plugins = splitList(*plugins)
		for _, p := range o.Plugins {
			if _, ok := sampler.Lookup(p); !ok {
				return fmt.Errorf("record: unknown plugin %q (known: %s)", p, strings.Join(sampler.Names(), ", "))
			}
		}
	}
	s, err := samplerd.Build(o, log, nil)
	if err != nil {
		return err
	}
	defer s.Close()

	f, err := os.Create(*out)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<16)
	var w io.Writer = bw
	var gz *gzip.Writer
	if strings.HasSuffix(*out, ".gz") {
		gz = gzip.NewWriter(bw)
		w = gz
	}
	tw := metric.TextWriter{Timestamps: true}
	var b metric.Batch
	ticks := int(*duration / *interval)
	log.Info("recording", "out", *out, "ticks", ticks, "interval", *interval, "plugins", strings.Join(o.Plugins, ","))
	next := sampler.NextTick(time.Now(), *interval, 0)
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	lastReport := time.Now()
	done := 0
loop:
	for done < ticks {
		select {
		case <-ctx.Done():
			break loop // stop early, keeping what was recorded
		case <-timer.C:
		}
		b.Reset(next)
		s.CollectOnce(ctx, next, &b)
		if err := tw.Write(w, &b); err != nil {
			return fmt.Errorf("record: write %s: %w", *out, err)
		}
		done++
		if time.Since(lastReport) >= time.Minute {
			log.Info("recording", "ticks", done, "of", ticks)
			lastReport = time.Now()
		}
		next = sampler.NextTick(time.Now(), *interval, 0)
		timer.Reset(time.Until(next))
	}
	if gz != nil {
		if err := gz.Close(); err != nil {
			return fmt.Errorf("record: write %s: %w", *out, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("record: write %s: %w", *out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("record: close %s: %w", *out, err)
	}
	fmt.Fprintf(stdout, "recorded %d ticks to %s\n", done, *out)
	return nil
}
