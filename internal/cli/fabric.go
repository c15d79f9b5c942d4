package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// fabricCommands are the subcommands of `vigil fabric`, registered by
// their files' init functions.
var fabricCommands = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{}

func init() {
	register(Command{Name: "fabric", Summary: "the InfiniBand fabric: worst links now (top)", Run: runFabric})
}

func runFabric(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	names := make([]string, 0, len(fabricCommands))
	for n := range fabricCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	usage := "usage: vigil fabric " + strings.Join(names, "|") + " [flags]"
	if len(args) == 0 {
		return &ExitError{Code: 2, Err: fmt.Errorf("%s", usage)}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, usage)
		return nil
	}
	run, ok := fabricCommands[args[0]]
	if !ok {
		return &ExitError{Code: 2, Err: fmt.Errorf("unknown subcommand %q\n%s", args[0], usage)}
	}
	return run(ctx, args[1:], stdout, stderr)
}
