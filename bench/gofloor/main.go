// Command gofloor is the smallest Go program that wakes like the sampler
// (a 100 ms ticker, one pread of a /proc file per wake-up, GOMAXPROCS=1).
// Its CPU use is the floor any Go node daemon pays on a machine: compare it
// with bin/vigil-sampler's in the same run.
//
//	go build -o /tmp/gofloor ./bench/gofloor && /tmp/gofloor -duration 20s
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
)

func main() {
	interval := flag.Duration("interval", 100*time.Millisecond, "wake-up interval")
	duration := flag.Duration("duration", 20*time.Second, "how long to run")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf := make([]byte, 256)
	var r0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	t := time.NewTicker(*interval)
	n := 0
	for start := time.Now(); time.Since(start) < *duration; n++ {
		<-t.C
		f.ReadAt(buf, 0)
	}
	var r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(syscall.TimevalToNsec(r1.Utime) + syscall.TimevalToNsec(r1.Stime) -
		syscall.TimevalToNsec(r0.Utime) - syscall.TimevalToNsec(r0.Stime))
	fmt.Printf("%d wake-ups, CPU %v: %.1f µs per wake-up, %.3f %% of one core\n",
		n, cpu, float64(cpu)/float64(n)/1e3, 100*float64(cpu)/float64(*duration))
}
