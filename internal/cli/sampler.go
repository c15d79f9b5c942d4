package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/samplerd"
)

func init() {
	register(Command{Name: "sampler", Summary: "run the node sampler daemon (serves /metrics)", Run: runSampler})
	register(Command{Name: "sample", Summary: "collect once and print Prometheus text (--once)", Run: runSample})
}

// runSampler hands over to bin/vigil-sampler when it sits beside this
// binary: the lean binary links only the sampler and so keeps the node
// daemon's memory small. VIGIL_SAMPLER_INPROCESS=1 keeps it in this process.
func runSampler(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if os.Getenv("VIGIL_SAMPLER_INPROCESS") == "" {
		if exe, err := os.Executable(); err == nil {
			lean := filepath.Join(filepath.Dir(exe), "vigil-sampler")
			if st, err := os.Stat(lean); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				argv := append([]string{lean}, args...)
				if err := syscall.Exec(lean, argv, os.Environ()); err != nil {
					fmt.Fprintf(stderr, "vigil sampler: exec %s: %v; running in this process\n", lean, err)
				}
			}
		}
	}
	return runSamplerHere(ctx, args, stdout, stderr)
}

// runSamplerHere runs the sampler in this process, with the same steps as
// cmd/vigil-sampler (which cannot link this package).
func runSamplerHere(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sampler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c, err := config.ParseFlags(fs, args, samplerd.ConfigUsage, samplerd.FromFile)
	if err != nil {
		return err
	}
	if c.SampleConfig {
		_, err := io.WriteString(stdout, samplerd.SampleConfig())
		return err
	}
	log, err := logging.New(stderr, c.Log)
	if err != nil {
		return err
	}
	d, err := samplerd.New(c, log)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// runSample is `vigil sample --once`.
func runSample(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sample", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c, err := config.ParseFlags(fs, args, samplerd.ConfigUsage, samplerd.OnceFromFile)
	if err != nil {
		return err
	}
	log, err := logging.New(stderr, c.Log)
	if err != nil {
		return err
	}
	return samplerd.Once(ctx, c, log, stdout)
}
