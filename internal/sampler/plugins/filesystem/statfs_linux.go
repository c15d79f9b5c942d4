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
