package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/vigil-hpc/vigil/internal/iofs"
	"github.com/vigil-hpc/vigil/internal/logging"
)

func init() {
	register(Command{Name: "iofs", Summary: "FUSE passthrough mount that reports per-file, per-process I/O (mmap included) to the sampler", Run: runIofs})
}

// runIofs mounts --source on MOUNTPOINT and serves until stopped (then it
// unmounts) or unmounted from outside (fusermount3 -u).
func runIofs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("iofs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: vigil iofs --source DIR [--socket PATH] [--interval 1s] [--allow-other] MOUNTPOINT")
		fs.PrintDefaults()
	}
	cfg := iofs.DefaultConfig()
	cfg.RegisterFlags(fs)
	var logOpts logging.Options
	logOpts.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
	case 1:
		cfg.Mountpoint = fs.Arg(0)
	default:
		return fmt.Errorf("unexpected argument %q after MOUNTPOINT", fs.Arg(1))
	}
	log, err := logging.New(stderr, logOpts)
	if err != nil {
		return err
	}
	t, err := iofs.New(cfg, log)
	if err != nil {
		return err
	}
	return t.Run(ctx)
}
