package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/vigil-hpc/vigil/internal/config"
)

func init() {
	register(Command{Name: "check-config", Summary: "validate a configuration file without starting anything", Run: checkConfig})
}

func checkConfig(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return &ExitError{Code: 2, Err: errors.New("usage: vigil check-config FILE")}
	}
	if _, err := config.Load(args[0]); err != nil {
		fmt.Fprintln(stderr, err)
		return &ExitError{Code: 1, Err: errors.New("")}
	}
	_, err := fmt.Fprintf(stdout, "%s: OK\n", args[0])
	return err
}
