//go:build linux && (amd64 || arm64)

package textfile

import (
	"syscall"
	"unsafe"
)

// atFDCWD makes fstatat resolve a relative path from the working directory.
const atFDCWD = -100

// statKey stats a NUL-terminated path (following symlinks, as opening it
// would) without the string conversion, and so the allocation, of
// syscall.Stat: it runs for every file on every tick.
func statKey(path []byte, st *syscall.Stat_t) (fileKey, error) {
	cwd := atFDCWD
	for {
		_, _, e := syscall.Syscall6(sysFstatat, uintptr(cwd), uintptr(unsafe.Pointer(&path[0])), uintptr(unsafe.Pointer(st)), 0, 0, 0)
		switch e {
		case 0:
			return fileKey{
				dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size,
				mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec, ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
				regular: st.Mode&syscall.S_IFMT == syscall.S_IFREG,
			}, nil
		case syscall.EINTR:
			continue
		}
		return fileKey{}, e
	}
}
