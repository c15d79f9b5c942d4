package procs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"syscall"
	"unsafe"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// procDir is <root>/proc, opened once and listed with getdents into a
// reused buffer; per-process files are opened relative to it.
type procDir struct {
	path string
	fd   int
	dbuf []byte
}

func (d *procDir) open() error {
	if d.fd >= 0 {
		return nil
	}
	fd, err := syscall.Open(d.path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", d.path, err)
	}
	d.fd = fd
	if d.dbuf == nil {
		d.dbuf = make([]byte, 32<<10)
	}
	return nil
}

func (d *procDir) close() {
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
}

// listPIDs appends the numeric entries of the directory to pids.
//
// This file's system calls are raw (the runtime is not told) except the
// reads that may sleep on a lock (see preadMaySleep): a call the runtime
// is told about wakes its sysmon thread, which then polls every 20 µs
// for the rest of the tick, 10 % of this plugin's CPU.
func (d *procDir) listPIDs(pids []int32) ([]int32, error) {
	if err := d.open(); err != nil {
		return pids, err
	}
	// Rewinding makes /proc generate a fresh listing; no reopen needed.
	if _, _, e := syscall.RawSyscall(syscall.SYS_LSEEK, uintptr(d.fd), 0, 0); e != 0 {
		d.close()
		return pids, fmt.Errorf("rewind %s: %w", d.path, e)
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_GETDENTS64, uintptr(d.fd), uintptr(unsafe.Pointer(&d.dbuf[0])), uintptr(len(d.dbuf)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			d.close()
			return pids, fmt.Errorf("list %s: %w", d.path, e)
		}
		if n == 0 {
			return pids, nil
		}
		var err error
		if pids, err = parseDirents(d.dbuf[:n], pids); err != nil {
			d.close()
			return pids, fmt.Errorf("list %s: %w", d.path, err)
		}
	}
}

// parseDirents reads linux_dirent64 records (ino u64, off s64, reclen u16,
// type u8, NUL-terminated name) and appends names that are pids.
func parseDirents(buf []byte, pids []int32) ([]int32, error) {
	const nameOff = 19
	for len(buf) > 0 {
		if len(buf) < nameOff {
			return pids, errors.New("truncated directory entry")
		}
		reclen := int(binary.NativeEndian.Uint16(buf[16:]))
		if reclen < nameOff || reclen > len(buf) {
			return pids, fmt.Errorf("directory entry length %d out of range", reclen)
		}
		name := buf[nameOff:reclen]
		if i := indexNUL(name); i >= 0 {
			name = name[:i]
		}
		if pid, ok := parsePID(name); ok {
			pids = append(pids, pid)
		}
		buf = buf[reclen:]
	}
	return pids, nil
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// parsePID accepts the names the kernel gives process directories.
func parsePID(name []byte) (int32, bool) {
	if len(name) == 0 || name[0] == '0' {
		return 0, false
	}
	v, err := kernfs.ParseUint(name)
	if err != nil || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// openat opens path (NUL-terminated) relative to dirfd. syscall.Openat
// copies its string argument to the heap on every call, which is one
// allocation per process per tick; the raw call with our own buffer is
// zero (see BenchmarkSample).
func openat(dirfd int, path []byte) (int, error) {
	if len(path) == 0 || path[len(path)-1] != 0 {
		return -1, syscall.EINVAL
	}
	for {
		// Raw: opening a /proc/<pid> file is a lookup, with no lock to sleep on.
		r, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&path[0])),
			uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// maxProcFile bounds a per-process file read; real ones are under 4 KiB.
const maxProcFile = 1 << 20

// pread reads the whole file behind fd from offset 0 into buf, growing it
// (up to maxProcFile) when the content does not fit, and returns the
// content and the possibly grown buffer. Raw: for stat and status, which
// the kernel renders without taking a lock it could sleep on.
func pread(fd int, buf []byte) (data, grown []byte, err error) {
	return preadWith(fd, buf, false)
}

// preadMaySleep is pread told to the runtime, for files whose read can
// wait on another process: io takes the process's exec_update_lock (held
// across part of an exec), and a raw call blocked there would hold up the
// garbage collector's stop-the-world with it.
func preadMaySleep(fd int, buf []byte) (data, grown []byte, err error) {
	return preadWith(fd, buf, true)
}

func preadWith(fd int, buf []byte, maySleep bool) (data, grown []byte, err error) {
	for {
		var n uintptr
		var e syscall.Errno
		if maySleep {
			n, _, e = syscall.Syscall6(syscall.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		} else {
			n, _, e = syscall.RawSyscall6(syscall.SYS_PREAD64, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
		}
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return nil, buf, e
		}
		if int(n) < len(buf) {
			return buf[:n], buf, nil
		}
		if len(buf) >= maxProcFile {
			return nil, buf, fmt.Errorf("larger than %d bytes", maxProcFile)
		}
		buf = make([]byte, 2*len(buf))
	}
}

// vanished reports errors meaning the process exited while we read it.
func vanished(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
}

// denied reports errors meaning we may not read another user's process
// (io without privileges, or /proc mounted with hidepid).
func denied(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

func closeFD(fd int) { syscall.RawSyscall(syscall.SYS_CLOSE, uintptr(fd), 0, 0) }

// fdBudget caps kept-open stat files at a quarter of the descriptor limit
// so the rest of the daemon is never starved.
func fdBudget(want int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < math.MaxInt32 {
		return min(want, int(rl.Cur/4))
	}
	return want
}
