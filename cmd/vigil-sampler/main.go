// Command vigil-sampler is the lean node daemon that `vigil sampler` runs:
// it links only the sampler, so it starts small on compute nodes.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vigil-hpc/vigil/internal/samplerd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := samplerd.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vigil sampler: %v\n", err)
		os.Exit(1)
	}
}
