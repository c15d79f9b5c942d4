package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vigil-hpc/vigil/internal/health"
)

func init() {
	register(Command{Name: "health", Summary: "node health check tools (health import-nhc nhc.conf: convert NHC checks to vigil.toml)", Run: runHealth})
}

const healthUsage = "usage: vigil health import-nhc [--node NAME] FILE"

func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &ExitError{Code: 2, Err: errors.New(healthUsage)}
	}
	switch args[0] {
	case "import-nhc":
		return runImportNHC(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, healthUsage)
		return flag.ErrHelp
	}
	return &ExitError{Code: 2, Err: fmt.Errorf("unknown subcommand %q\n%s", args[0], healthUsage)}
}

// runImportNHC prints the [plugins.health] checks of an nhc.conf.
func runImportNHC(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vigil health import-nhc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	node := fs.String("node", "", "take the lines whose hostmask (glob or /regex/) matches this node, not only \"*\" lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &ExitError{Code: 2, Err: errors.New(healthUsage)}
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	im, err := health.ImportNHC(f, *node)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	return im.WriteTOML(stdout, fs.Arg(0))
}
