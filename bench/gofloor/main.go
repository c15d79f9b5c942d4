// Command gofloor is the smallest Go program that wakes like the sampler
// (every 100 ms, one pread of a /proc file per wake-up, GOMAXPROCS=1). Its
// CPU use is the floor a Go node daemon pays on a machine for each way of
// waiting and reading: compare it with bin/vigil-sampler's in the same run.
//
//	go build -o /tmp/gofloor ./bench/gofloor
//	/tmp/gofloor -duration 20s                   # Go timer, os.File.ReadAt
//	/tmp/gofloor -duration 20s -timerfd -raw     # as vigil-sampler waits and reads
//	/tmp/gofloor -i NANOSECONDS [-u] [-n] [-a] [-l] [-k TICKS] [-P PROC [-Q TICKS]] [-r FILE]... [-p FILE]... [-s PATH]...
//
// With -i it is the Go read floor (floor.go): bench/readfloor's options and
// calls, made the way vigil-sampler waits and reads (bench/samplercost
// --gofloor runs it beside the C floor).
//
// -timerfd waits on a timerfd through the runtime's poller instead of a Go
// timer (the runtime's sysmon thread sleeps until the next Go timer, so a Go
// timer wakes it every tick); -raw reads with a raw pread syscall, which
// does not wake sysmon as a syscall the runtime is told about does.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

func main() {
	interval := flag.Duration("interval", 100*time.Millisecond, "wake-up interval")
	duration := flag.Duration("duration", 20*time.Second, "how long to run")
	timerfd := flag.Bool("timerfd", false, "wait on a timerfd instead of a Go timer (Linux)")
	raw := flag.Bool("raw", false, "read with a raw pread syscall instead of os.File.ReadAt")
	var fa floorArgs
	flag.Int64Var(&fa.iv, "i", 0, "read floor mode: wake every this many nanoseconds and make readfloor's calls until killed")
	flag.Int64Var(&fa.every, "k", 100, "read floor: re-read the -p files every this many ticks")
	flag.BoolVar(&fa.rusage, "u", false, "read floor: getrusage each tick")
	flag.BoolVar(&fa.uname, "n", false, "read floor: uname each tick")
	flag.BoolVar(&fa.adjtx, "a", false, "read floor: read-only adjtimex each tick")
	flag.BoolVar(&fa.netlink, "l", false, "read floor: one netlink RTM_GETSTATS dump each tick")
	flag.StringVar(&fa.procDir, "P", "", "read floor: list this /proc and pread each process's stat every -Q ticks")
	flag.Int64Var(&fa.procsEvery, "Q", 1, "read floor: the -P listing's period in ticks")
	flag.Var(&fa.reads, "r", "read floor: pread this file each tick (repeatable)")
	flag.Var(&fa.polls, "p", "read floor: ppoll this file each tick (repeatable)")
	flag.Var(&fa.stats, "s", "read floor: statfs this path each tick (repeatable)")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	if fa.iv != 0 {
		fail(runFloor(&fa))
	}
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		fail(err)
	}
	fd := f.Fd()
	buf := make([]byte, 256)
	wait := goTimer(*interval)
	if *timerfd {
		if wait, err = timerFD(*interval); err != nil {
			fail(err)
		}
	}
	var r0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	n := 0
	for start := time.Now(); time.Since(start) < *duration; n++ {
		wait()
		if *raw {
			syscall.RawSyscall6(syscall.SYS_PREAD64, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		} else {
			f.ReadAt(buf, 0)
		}
	}
	var r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(syscall.TimevalToNsec(r1.Utime) + syscall.TimevalToNsec(r1.Stime) -
		syscall.TimevalToNsec(r0.Utime) - syscall.TimevalToNsec(r0.Stime))
	fmt.Printf("timerfd=%v raw=%v: %d wake-ups, CPU %v: %.1f µs per wake-up, %.3f %% of one core\n",
		*timerfd, *raw, n, cpu, float64(cpu)/float64(n)/1e3, 100*float64(cpu)/float64(*duration))
}

func goTimer(iv time.Duration) func() {
	t := time.NewTicker(iv)
	return func() { <-t.C }
}

// timerFD returns a wait on a periodic timerfd read through the poller.
func timerFD(iv time.Duration) (func(), error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, 0 /* CLOCK_REALTIME */, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return nil, fmt.Errorf("timerfd_create: %w", e)
	}
	ts := syscall.NsecToTimespec(int64(iv))
	spec := [2]syscall.Timespec{ts, ts} // interval, first expiry (relative)
	if _, _, e := syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); e != 0 {
		return nil, fmt.Errorf("timerfd_settime: %w", e)
	}
	rc, err := os.NewFile(fd, "timerfd").SyscallConn()
	if err != nil {
		return nil, err
	}
	var exp [8]byte
	read := func(fd uintptr) bool {
		_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&exp[0])), 8)
		return e != syscall.EAGAIN
	}
	return func() { _ = rc.Read(read) }, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gofloor:", err)
	os.Exit(1)
}
