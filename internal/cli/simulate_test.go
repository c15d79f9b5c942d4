package cli

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

type jobSeriesHandler struct {
	wire.NopHandler
	mu    sync.Mutex
	ticks int
	jobs  map[string]bool // jobids with vigil_job_running
}

func (h *jobSeriesHandler) Tick(_ string, _ time.Time, d []*metric.Desc, _ []float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ticks++
	for _, x := range d {
		if x.Name == "vigil_job_running" {
			h.jobs[x.Labels[0].Value] = true
		}
	}
}

// TestSimulateJobsFlag: `vigil simulate` runs jobs by default and none
// with --jobs=false.
func TestSimulateJobsFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		jobs bool
	}{{nil, true}, {[]string{"--jobs=false"}, false}, {[]string{"--job-seed", "9"}, true}} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := &jobSeriesHandler{jobs: map[string]bool{}}
			go func() { _ = wire.Serve(ctx, ln, wire.ServerOptions{Log: slog.New(slog.DiscardHandler)}, h) }()
			done := make(chan error, 1)
			args := append([]string{"--nodes", "16", "--cpus", "2", "--interval", "20ms", "--upstream", ln.Addr().String(), "--log-level", "error"}, tc.args...)
			go func() { done <- runSimulate(ctx, args, io.Discard, io.Discard) }()
			deadline := time.Now().Add(10 * time.Second)
			for {
				h.mu.Lock()
				ticks, jobs := h.ticks, len(h.jobs)
				h.mu.Unlock()
				if ticks >= 16*5 {
					if (jobs > 0) != tc.jobs {
						t.Errorf("%d ticks with %d jobs, want jobs: %v", ticks, jobs, tc.jobs)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("only %d ticks", ticks)
				}
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
