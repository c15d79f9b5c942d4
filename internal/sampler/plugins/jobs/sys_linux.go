//go:build linux

package jobs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"syscall"
	"unsafe"
)

// cgFile is one cgroup (or /proc) file, named by a NUL-terminated path and
// kept open between ticks while the descriptor budget allows. Its content
// is read into the plugin's shared buffer and parsed at once, so a job's
// files own no buffers: thousands of jobs cost descriptors, not memory.
type cgFile struct {
	path    []byte // NUL-terminated; nil: the file is not read
	fd      int32  // -1: not open
	missing bool   // found absent: not read until the job's next scan
}

func newFile(path []byte) cgFile {
	p := make([]byte, len(path)+1)
	copy(p, path)
	return cgFile{path: p, fd: -1}
}

func (f *cgFile) ok() bool { return len(f.path) > 0 && !f.missing }

// name is the path without its NUL, for messages.
func (f *cgFile) name() string {
	if len(f.path) == 0 {
		return ""
	}
	return string(f.path[:len(f.path)-1])
}

// fds hands out the descriptors files may keep open between ticks.
type fds struct{ left int }

func (b *fds) close(f *cgFile) {
	if f.fd >= 0 {
		syscall.Close(int(f.fd))
		f.fd = -1
		b.left++
	}
}

// read returns the file's content in buf (grown if needed; the returned
// slice aliases it).
func (b *fds) read(f *cgFile, buf *[]byte) ([]byte, error) {
	if f.fd >= 0 {
		data, err := pread(int(f.fd), buf)
		if err == nil {
			return data, nil
		}
		b.close(f) // removed cgroup (ENODEV) or exited process: try by path
		if !gone(err) {
			return nil, err
		}
	}
	fd, err := openPath(f.path)
	if err != nil {
		return nil, err
	}
	data, err := pread(fd, buf)
	if err == nil && b.left > 0 {
		f.fd = int32(fd)
		b.left--
	} else {
		syscall.Close(fd)
	}
	return data, err
}

// openPath opens a NUL-terminated path. syscall.Open copies its string to
// the heap on every call; the raw call on our own bytes does not.
func openPath(path []byte) (int, error) {
	if len(path) == 0 || path[len(path)-1] != 0 {
		return -1, syscall.EINVAL
	}
	for {
		r, _, e := syscall.Syscall6(syscall.SYS_OPENAT, cwd(), uintptr(unsafe.Pointer(&path[0])),
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

const atFDCWD = -0x64

// cwd is AT_FDCWD as a syscall argument (a negative constant cannot be
// converted to uintptr directly).
func cwd() uintptr {
	fd := atFDCWD
	return uintptr(fd)
}

// maxFile bounds one read: a memory.stat is ~1.5 KiB, a cgroup.procs of
// a huge job some hundred KiB.
const maxFile = 4 << 20

func pread(fd int, buf *[]byte) ([]byte, error) {
	for {
		n, err := syscall.Pread(fd, *buf, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n < len(*buf) {
			return (*buf)[:n], nil
		}
		if len(*buf) >= maxFile {
			return nil, fmt.Errorf("larger than %d bytes", maxFile)
		}
		*buf = make([]byte, 2*len(*buf))
	}
}

// gone reports errors meaning the cgroup or process went away: a removed
// cgroup's open files read ENODEV, its path ENOENT; a process ESRCH.
func gone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENODEV) ||
		errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOTDIR)
}

// denied reports a file we may not read (another user's /proc/<pid>/io).
func denied(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// listDirs lists the subdirectories of path (NUL-terminated) into *names,
// whose entries point into *dbuf and stay valid until the next call with
// the same buffer. Entries of unknown type are included (callers open
// them, which fails for files).
func listDirs(path []byte, dbuf *[]byte, names *[][]byte) error {
	fd, err := openDir(path)
	if err != nil {
		*names = (*names)[:0]
		return err
	}
	_, err = listFD(fd, dbuf, names)
	syscall.Close(fd)
	return err
}

// dirFD is a directory listed every tick through a descriptor kept open.
type dirFD struct {
	pathZ []byte
	fd    int32
}

func newDirFD(pathZ []byte) *dirFD { return &dirFD{pathZ: pathZ, fd: -1} }

// list lists d's subdirectories as listDirs does. A removed cgroup's
// descriptor lists nothing, not even the control files every live cgroup
// has, so an empty listing is retried by path: a directory removed and
// made again (a user's uid_<n> between two jobs) is listed afresh.
func (d *dirFD) list(dbuf *[]byte, names *[][]byte) error {
	if d.fd >= 0 {
		if _, err := syscall.Seek(int(d.fd), 0, 0); err == nil {
			if n, err := listFD(int(d.fd), dbuf, names); err == nil && n > 0 {
				return nil
			}
		}
		d.close()
	}
	fd, err := openDir(d.pathZ)
	if err != nil {
		*names = (*names)[:0]
		return err
	}
	d.fd = int32(fd)
	_, err = listFD(fd, dbuf, names)
	return err
}

func (d *dirFD) close() {
	if d.fd >= 0 {
		syscall.Close(int(d.fd))
		d.fd = -1
	}
}

// listFD reads the directory behind fd from its current offset; n counts
// every entry but "." and "..", directories or not.
func listFD(fd int, dbuf *[]byte, names *[][]byte) (n int, err error) {
	*names = (*names)[:0]
	if len(*dbuf) == 0 {
		*dbuf = make([]byte, 16<<10)
	}
	used := 0
	for {
		if len(*dbuf)-used < 4096 {
			if len(*dbuf) >= maxFile {
				return 0, fmt.Errorf("directory larger than %d bytes", maxFile)
			}
			nb := make([]byte, 2*len(*dbuf))
			copy(nb, (*dbuf)[:used])
			*dbuf = nb
		}
		k, err := syscall.Getdents(fd, (*dbuf)[used:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if k <= 0 {
			break
		}
		used += k
	}
	for b := (*dbuf)[:used]; len(b) >= 19; {
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			return 0, fmt.Errorf("bad directory record length %d", reclen)
		}
		typ, name := b[18], b[19:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		b = b[reclen:]
		if string(name) == "." || string(name) == ".." {
			continue
		}
		n++
		if typ == syscall.DT_DIR || typ == syscall.DT_UNKNOWN {
			*names = append(*names, name)
		}
	}
	return n, nil
}

func openDir(path []byte) (int, error) {
	if len(path) == 0 || path[len(path)-1] != 0 {
		return -1, syscall.EINVAL
	}
	for {
		r, _, e := syscall.Syscall6(syscall.SYS_OPENAT, cwd(), uintptr(unsafe.Pointer(&path[0])),
			uintptr(syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// exists reports whether the path (NUL-terminated) exists.
func exists(path []byte) bool {
	if len(path) == 0 || path[len(path)-1] != 0 {
		return false
	}
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_FACCESSAT, cwd(), uintptr(unsafe.Pointer(&path[0])), 0, 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		return e == 0
	}
}

// fdBudget caps kept-open files at a quarter of the descriptor limit.
func fdBudget(want int) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < math.MaxInt32 {
		return min(want, int(rl.Cur/4))
	}
	return want
}
