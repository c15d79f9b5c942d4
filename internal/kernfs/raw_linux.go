package kernfs

import (
	"syscall"
	"unsafe"
)

// The f_type statfs reports for procfs and sysfs.
const (
	procSuperMagic  = 0x9fa0
	sysfsSuperMagic = 0x62656572
)

// onProcFS reports whether fd is on procfs or sysfs, where a file the
// caller vouches for is generated in memory on read.
func onProcFS(fd int) bool {
	var st syscall.Statfs_t
	return syscall.Fstatfs(fd, &st) == nil && (st.Type == procSuperMagic || st.Type == sysfsSuperMagic)
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

// directPread: File.Read calls pread itself.
const directPread = true

// pread reads from offset 0 with a syscall the runtime knows of (it may
// block: a driver's attribute), retrying EINTR.
func pread(fd int, buf []byte) (int, error) {
	for {
		n, err := syscall.Pread(fd, buf, 0)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
