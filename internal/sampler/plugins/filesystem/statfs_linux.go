//go:build linux

package filesystem

import (
	"syscall"
	"unsafe"
)

// statfsRaw is statfs(2) on a NUL-terminated path, without the per-call
// string conversion of syscall.Statfs. Syscall (not RawSyscall): the call
// can block for as long as a dead network file system server likes.
func statfsRaw(path []byte, st *syscall.Statfs_t) error {
	for {
		_, _, e := syscall.Syscall(syscall.SYS_STATFS, uintptr(unsafe.Pointer(&path[0])), uintptr(unsafe.Pointer(st)), 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return e
	}
}

// statfsNoBlock is statfs(2) as a raw syscall, unseen by the Go scheduler,
// for mounts whose statfs cannot block (see inlineSafe). A syscall the
// runtime is told about wakes its sysmon thread when all goroutines were
// asleep; at 10 Hz that costs more CPU than the call.
func statfsNoBlock(path []byte, st *syscall.Statfs_t) error {
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_STATFS, uintptr(unsafe.Pointer(&path[0])), uintptr(unsafe.Pointer(st)), 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return e
	}
}
