//go:build unix

package pattern_test

import "syscall"

// cpuSeconds is the user+system CPU time of this process. Benchmarks report
// lines per CPU second besides lines per wall second, because a shared
// build machine stretches wall time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
