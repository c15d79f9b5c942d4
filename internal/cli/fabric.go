package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// fabricCommands are the subcommands of `vigil fabric`; each file adds its
// own from init (fabric_sweep.go: sweep, fabric_top.go: top).
var fabricCommands = map[string]Command{}

func init() {
	register(Command{Name: "fabric", Summary: "InfiniBand fabric: sweep it once, or show its worst links", Run: runFabric})
}

func fabricUsage() string {
	names := make([]string, 0, len(fabricCommands))
	for n := range fabricCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("usage: vigil fabric SUBCOMMAND [flags]\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  %-8s %s\n", n, fabricCommands[n].Summary)
	}
	return b.String()
}

func runFabric(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &ExitError{Code: 2, Err: errors.New(fabricUsage())}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, fabricUsage())
		return nil
	}
	c, ok := fabricCommands[args[0]]
	if !ok {
		return &ExitError{Code: 2, Err: fmt.Errorf("unknown subcommand %q\n%s", args[0], fabricUsage())}
	}
	return c.Run(ctx, args[1:], stdout, stderr)
}
