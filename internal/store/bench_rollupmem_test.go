package store

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRollupPassMemory measures how far a 30-minute pass over 40,000
// raw series, with the merge of its blocks, raises the heap above what
// the raw store holds: the pass is what took the server above
// Prometheus' RSS (docs/benchmarks.md, "Server memory again"). The
// process runs at the server's GOGC (50); pass_gogc is
// RollupOptions.PassGCPercent (0: unchanged). The heap is sampled every
// 2 ms; peak_heap_MB is the highest sample minus the live heap before the
// pass, cpu_s the process's CPU time for the Step.
func BenchmarkRollupPassMemory(b *testing.B) {
	const series, minutes = 40_000, 30
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	s, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fillRaw(b, s, series, 60*minutes)
	for _, gogc := range []int{0, 20, 10} {
		b.Run(fmt.Sprintf("pass_gogc=%d", gogc), func(b *testing.B) {
			var (
				peak, before uint64
				blocks       int
				cpu          time.Duration
			)
			for b.Loop() {
				r, err := OpenRollup(s, RollupOptions{Dir: b.TempDir(), PassGCPercent: gogc})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				before = readMetric(heapObjects)
				c0 := processCPU()
				stop, got := sampleHeap()
				if n, err := r.Step(context.Background(), base.Add((minutes+1)*time.Minute)); err != nil || n != minutes {
					b.Fatalf("step: %d minutes, %v", n, err)
				}
				peak = max(peak, got(stop))
				cpu += processCPU() - c0
				blocks = len(r.db.Blocks())
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
			}
			if gc := debug.SetGCPercent(50); gc != 50 {
				b.Fatalf("GOGC after the pass is %d, want 50 restored", gc)
			}
			b.ReportMetric(float64(peak-min(peak, before))/(1<<20), "peak_heap_MB")
			b.ReportMetric(float64(before)/(1<<20), "before_MB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu_s")
			b.ReportMetric(float64(blocks), "blocks_after")
		})
	}
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sampleHeap samples the heap's objects until stop is closed; got returns
// the highest sample.
func sampleHeap() (chan struct{}, func(chan struct{}) uint64) {
	stop := make(chan struct{})
	var (
		wg   sync.WaitGroup
		peak uint64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, readMetric(heapObjects))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return stop, func(stop chan struct{}) uint64 { close(stop); wg.Wait(); return peak }
}
