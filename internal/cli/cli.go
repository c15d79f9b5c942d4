// Package cli dispatches the subcommands of the vigil binary, one file per
// subcommand.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the subcommand registry, filled by init functions of this
// package's files and read-only afterwards.
var commands = map[string]Command{}

func register(c Command) { commands[c.Name] = c }

// ExitError carries a specific exit status.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Main runs the subcommand named by args[0] and returns the exit status.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "vigil: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := c.Run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil && ee.Err.Error() != "" {
			fmt.Fprintf(stderr, "vigil %s: %v\n", c.Name, ee.Err)
		}
		return ee.Code
	}
	if h := clientHint(err); h != "" {
		fmt.Fprintf(stderr, "vigil %s: %v %s\n", c.Name, err, h)
		return 1
	}
	fmt.Fprintf(stderr, "vigil %s: %v\n", c.Name, err)
	return 1
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: vigil COMMAND [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w, "\nRun 'vigil COMMAND -h' for the flags of one command.")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
