// Command vigil is the single binary of the Vigil HPC monitoring system.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigil-hpc/vigil/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
