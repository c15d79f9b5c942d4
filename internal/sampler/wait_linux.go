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
	f    *os.File
	rc   syscall.RawConn
	fd   uintptr
	spec itimerspec
	exp  [8]byte       // expiration count read from the timerfd
	errn syscall.Errno // result of the last read
	read func(fd uintptr) bool
	stop func() bool // unregisters the ctx hook
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
	k := &kernelTimer{f: f, rc: rc, fd: fd}
	// Built once: a closure made per wait would allocate every tick.
	k.read = k.readOnce
	// A past deadline wakes a wait blocked in the poller when ctx ends.
	k.stop = context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	return k, nil
}

// readOnce is the RawConn callback: one non-blocking read(2), done unless
// the timer has not expired yet. Raw syscalls: neither call can block, and
// a syscall the runtime is told about would wake sysmon.
func (k *kernelTimer) readOnce(fd uintptr) bool {
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
	// CANCEL_ON_SET: a wall clock set back (or forward) ends the wait with
	// ECANCELED instead of leaving it armed for a time that has moved.
	_, _, e := syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, k.fd, tfdTimerAbstime|tfdTimerCancelOnSet,
		uintptr(unsafe.Pointer(&k.spec)), 0, 0, 0)
	if e != 0 {
		return fmt.Errorf("timerfd_settime: %w", e)
	}
	if err := k.rc.Read(k.read); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("timerfd: %w", err)
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
