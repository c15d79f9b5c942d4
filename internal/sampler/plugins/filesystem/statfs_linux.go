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
	return statfsCall(false, path, st)
}

// statfsNoBlock is statfs(2) as a raw syscall, unseen by the Go scheduler,
// for mounts whose statfs cannot block (see inlineSafe). A syscall the
// runtime is told about wakes its sysmon thread when all goroutines were
// asleep; at 10 Hz that costs more CPU than the call.
func statfsNoBlock(path []byte, st *syscall.Statfs_t) error {
	return statfsCall(true, path, st)
}

// statfsCall calls statfs(2) directly either way (the pointer-to-uintptr
// conversions are only kept valid in direct syscall calls).
func statfsCall(raw bool, path []byte, st *syscall.Statfs_t) error {
	for {
		var e syscall.Errno
		if raw {
			_, _, e = syscall.RawSyscall(syscall.SYS_STATFS, uintptr(unsafe.Pointer(&path[0])), uintptr(unsafe.Pointer(st)), 0)
		} else {
			_, _, e = syscall.Syscall(syscall.SYS_STATFS, uintptr(unsafe.Pointer(&path[0])), uintptr(unsafe.Pointer(st)), 0)
		}
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return e
	}
}
