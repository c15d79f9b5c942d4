package ibnet

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil/ibsim"
)

// BenchmarkSweep sweeps the 1,296-port fat tree from one host against
// ibsim (discovery done before the timer): ns/op is one sweep, allocs/op
// the Go side's allocations per sweep. mad-µs is the sweep's time over its
// MADs (mads/op: 5 a port, PortCountersExtended, PortCounters and the
// three optional attributes ibsim answers); helper-mad-µs the helper's own
// time per MAD in the last sweep (the difference is the Go side and the
// pipe).
func BenchmarkSweep(b *testing.B) {
	for _, w := range []int{1, 4, 8, 16} {
		b.Run("window="+strconv.Itoa(w), func(b *testing.B) { benchSweep(b, w) })
	}
}

func benchSweep(b *testing.B, window int) {
	helper := helperBinary(b)
	sim := ibsim.Start(b, bigTree)
	s := New(Config{Helper: helper, Env: sim.Env(""), Dir: sim.Dir, Window: window, MADTimeout: time.Second})
	defer s.Close()
	ctx := context.Background()
	if err := s.Sweep(ctx); err != nil {
		b.Fatal(err)
	}
	s.Sweep(ctx) // warm: the snapshot storage exists
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		// A loaded machine may drop a MAD now and then: counted, not fatal.
		if err := s.Sweep(ctx); errors.Is(err, ErrHelper) {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var ports, mads int
	var failed uint64
	var helperMAD time.Duration
	s.Read(func(snap *Snapshot) {
		ports, mads, failed, helperMAD = snap.PortsSwept, snap.MADs, snap.Failures[FailPort], snap.MADTime
	})
	b.ReportMetric(float64(helperMAD.Nanoseconds())/1e3, "helper-mad-µs")
	b.ReportMetric(float64(failed)/float64(b.N), "failed-ports/op")
	b.ReportMetric(float64(ports), "ports")
	b.ReportMetric(float64(mads), "mads/op")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(mads), "mad-µs")
}

// BenchmarkPerfquery is the alternative measured: one perfquery process
// per port (PortCounters + extended = 2 runs), on 20 ports; ns/op is per port.
func BenchmarkPerfquery(b *testing.B) {
	pq, err := exec.LookPath("perfquery")
	if err != nil {
		b.Skip("perfquery not installed")
	}
	sim := ibsim.Start(b, bigTree)
	env := sim.Env("")
	b.ResetTimer()
	for i := range b.N {
		port := strconv.Itoa(bigTree.HCAs + 1 + i%(bigTree.Spines*bigTree.Uplinks))
		for _, args := range [][]string{{"1", port}, {"-x", "1", port}} {
			cmd := exec.Command(pq, args...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil && !strings.Contains(string(out), "Port") {
				b.Fatalf("perfquery %v: %v: %s", args, err, out)
			}
		}
	}
}
