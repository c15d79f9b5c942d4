package filesystem

import (
	"syscall"
	"unsafe"
)

// watcher polls a mountinfo descriptor: the kernel flags POLLPRI|POLLERR
// on it when the mount namespace changes (proc(5)), so a new mount shows
// up on the next tick instead of after mount_refresh. Regular files
// (fixtures) never flag, leaving the periodic refresh.
//
// The descriptor is opened with syscall.Open, not os.Open: os.Open would
// register it with the runtime's epoll, whose background polls consume the
// change flag before we look.
type watcher struct {
	fd  int // -1 when closed
	pfd pollFD
	ts  syscall.Timespec // zero: poll without waiting
}

type pollFD struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollPri = 0x2
	pollErr = 0x8
)

func newWatcher(path string) (watcher, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return watcher{fd: -1}, err
	}
	return watcher{fd: fd, pfd: pollFD{fd: int32(fd), events: pollPri}}, nil
}

// changed reports whether the mount table changed since the last call.
// A raw syscall: ppoll with a zero timeout never blocks, and entering a
// syscall the runtime is told about would wake its sysmon thread every tick.
func (w *watcher) changed() bool {
	if w.fd < 0 {
		return false
	}
	w.pfd.revents = 0
	n, _, errno := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&w.pfd)), 1,
		uintptr(unsafe.Pointer(&w.ts)), 0, 0, 0)
	return errno == 0 && n > 0 && w.pfd.revents&(pollPri|pollErr) != 0
}

func (w *watcher) close() error {
	if w.fd < 0 {
		return nil
	}
	err := syscall.Close(w.fd)
	w.fd = -1
	return err
}
