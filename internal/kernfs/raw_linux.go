package kernfs

import (
	"syscall"
	"unsafe"
)

// procSuperMagic is the f_type statfs reports for procfs.
const procSuperMagic = 0x9fa0

func onProcFS(fd int) bool {
	var st syscall.Statfs_t
	return syscall.Fstatfs(fd, &st) == nil && st.Type == procSuperMagic
}

// rawPread reads from offset 0 with a syscall the runtime does not see
// (File.NonBlocking says when that is safe), retrying EINTR.
func rawPread(fd int, buf []byte) (int, error) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, e
	}
}
