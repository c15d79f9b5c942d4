package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vigil-hpc/vigil/internal/samplerd"
)

func init() {
	register(Command{Name: "sampler", Summary: "run the node sampler daemon (serves /metrics)", Run: runSampler})
	register(Command{Name: "sample", Summary: "collect once and print Prometheus text (--once)", Run: samplerd.SampleOnce})
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
	return samplerd.Run(ctx, args, stdout, stderr)
}
