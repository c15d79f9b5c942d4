package sampler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
	"unsafe"
)

// kernelTimer waits on a timerfd armed for the absolute wall-clock instant
// of the next tick and read through the runtime's network poller.
//
// Why not a Go timer: at 10 Hz the cost of a tick on a small VM is mostly
// threads waking up, not our work. The runtime's sysmon thread sleeps until
// the next Go timer, so a Go timer wakes two threads per tick and sysmon then
// polls every 20 µs while the tick runs. A timerfd is not a Go timer: only
// the thread blocked in epoll wakes, and sysmon keeps sleeping unless the tick
// makes a syscall the runtime is told about (syscall.Syscall, os.File reads);
// hence the raw syscalls here and in the plugins' non-blocking calls.
type kernelTimer struct {
	f      *os.File
	rc     syscall.RawConn
	spec   itimerspec
	exp    [8]byte       // expiration count read from the timerfd
	errn   syscall.Errno // result of the last read
	arm    bool          // the next call of read arms the timer (see readOnce)
	armErr syscall.Errno // result of arming
	read   func(fd uintptr) bool
	stop   func() bool // unregisters the ctx hook
}

type itimerspec struct {
	interval syscall.Timespec
	value    syscall.Timespec
}

const (
	clockRealtime       = 0
	tfdTimerAbstime     = 1 << 0
	tfdTimerCancelOnSet = 1 << 1
)

// newWaiter returns the kernel timer, or a Go timer where timerfd is
// unavailable (seccomp filters, very old kernels).
func newWaiter(ctx context.Context) waiter {
	k, err := newKernelTimer(ctx)
	if err != nil {
		return newGoTimer()
	}
	return k
}

func newKernelTimer(ctx context.Context) (*kernelTimer, error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockRealtime, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return nil, fmt.Errorf("timerfd_create: %w", e)
	}
	f := os.NewFile(fd, "timerfd") // non-blocking, so it joins the poller
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	k := &kernelTimer{f: f, rc: rc}
	// Built once: a closure made per wait would allocate every tick.
	k.read = k.readOnce
	// A past deadline wakes a wait blocked in the poller when ctx ends.
	k.stop = context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	return k, nil
}

// readOnce is the RawConn callback. Its first call of a wait arms the
// timer and parks without reading: a read(2) right after arming could only
// say EAGAIN. Arming here, after RawRead has reset the poller's state, is
// what makes skipping it safe: the expiry is then an edge the poller keeps
// even if it comes before the park (armed before RawRead, a past instant
// could expire and be reported to the poller, and RawRead would discard
// it). Later calls make one non-blocking read(2), done unless the timer
// has not expired yet (a wake-up without an expiry). Raw syscalls: none
// can block, and a syscall the runtime is told about would wake sysmon.
func (k *kernelTimer) readOnce(fd uintptr) bool {
	if k.arm {
		k.arm = false
		// CANCEL_ON_SET: a wall clock set back (or forward) ends the wait
		// with ECANCELED instead of leaving it armed for a time that has moved.
		_, _, k.armErr = syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, fd, tfdTimerAbstime|tfdTimerCancelOnSet,
			uintptr(unsafe.Pointer(&k.spec)), 0, 0, 0)
		return k.armErr != 0
	}
	for {
		_, _, k.errn = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&k.exp[0])), uintptr(len(k.exp)))
		if k.errn != syscall.EINTR {
			return k.errn != syscall.EAGAIN
		}
	}
}

func (k *kernelTimer) wait(ctx context.Context, next time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k.spec.value = syscall.NsecToTimespec(next.UnixNano())
	k.arm, k.armErr = true, 0
	if err := k.rc.Read(k.read); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("timerfd: %w", err)
	}
	if k.armErr != 0 {
		return fmt.Errorf("timerfd_settime: %w", k.armErr)
	}
	switch k.errn {
	case 0, syscall.ECANCELED:
		return nil
	}
	return fmt.Errorf("read timerfd: %w", k.errn)
}

func (k *kernelTimer) close() error {
	k.stop()
	return k.f.Close()
}
