package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/vigil-hpc/vigil/internal/buildinfo"
)

func init() {
	register(Command{Name: "version", Summary: "print the version", Run: func(_ context.Context, _ []string, stdout, _ io.Writer) error {
		_, err := fmt.Fprintln(stdout, buildinfo.String())
		return err
	}})
}
