//go:build linux

package processes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"unsafe"
)

// walker lists /proc and the task directories with getdents and opens
// stat files relative to directory descriptors, with NUL-terminated paths
// in its own buffers: syscall.Openat would copy each path to the heap.
type walker struct {
	path       string
	procFD     int
	pidBuf     []byte // dirents of /proc
	taskBuf    []byte // dirents of one task directory
	name, stat []byte
}

func (w *walker) init(path string) {
	w.path, w.procFD = path, -1
	w.pidBuf, w.taskBuf = make([]byte, 64<<10), make([]byte, 16<<10)
	w.stat = make([]byte, 1024)
}

func (w *walker) walk(c *Counts, maxThreads int) error {
	if w.procFD < 0 {
		fd, err := syscall.Open(w.path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", w.path, err)
		}
		w.procFD = fd
	}
	if _, err := syscall.Seek(w.procFD, 0, 0); err != nil {
		syscall.Close(w.procFD)
		w.procFD = -1
		return fmt.Errorf("rewind %s: %w", w.path, err)
	}
	for {
		n, err := syscall.Getdents(w.procFD, w.pidBuf)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s: %w", w.path, err)
		}
		if n <= 0 {
			return nil
		}
		// pidBuf is reused by the next Getdents only after this batch.
		for ents := w.pidBuf[:n]; len(ents) >= 19; {
			name, rest, ok := nextDirent(ents)
			if !ok {
				return fmt.Errorf("list %s: bad directory entry", w.path)
			}
			ents = rest
			if !isPID(name) {
				continue
			}
			w.process(c, name, maxThreads)
		}
	}
}

// process counts one process and its threads; one that exits meanwhile
// is skipped.
func (w *walker) process(c *Counts, pid []byte, maxThreads int) {
	w.name = append(append(append(w.name[:0], pid...), "/stat"...), 0)
	data, ok := w.readAt(w.procFD, w.name)
	if !ok {
		return
	}
	state, threads, err := ParseStat(data)
	if err != nil {
		return
	}
	c.PIDs++
	c.State[state]++
	c.Threads += threads
	w.name = append(append(append(w.name[:0], pid...), "/task"...), 0)
	tfd, err := openat(w.procFD, w.name, syscall.O_DIRECTORY)
	if err != nil {
		return
	}
	defer syscall.Close(tfd)
	for {
		n, err := syscall.Getdents(tfd, w.taskBuf)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		for ents := w.taskBuf[:n]; len(ents) >= 19; {
			name, rest, ok := nextDirent(ents)
			if !ok {
				return
			}
			ents = rest
			if !isPID(name) {
				continue
			}
			if c.threadsRead >= maxThreads {
				c.Truncated = true
				return
			}
			w.name = append(append(w.name[:0], name...), "/stat"...)
			w.name = append(w.name, 0)
			if data, ok := w.readAt(tfd, w.name); ok {
				if st, _, err := ParseStat(data); err == nil {
					c.ThreadState[st]++
					c.threadsRead++
				}
			}
		}
	}
}

// readAt reads a small file relative to dirfd into w.stat.
func (w *walker) readAt(dirfd int, name []byte) ([]byte, bool) {
	fd, err := openat(dirfd, name, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.Pread(fd, w.stat, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, false
		}
		if n < len(w.stat) {
			return w.stat[:n], true
		}
		if len(w.stat) >= 64<<10 {
			return nil, false
		}
		w.stat = make([]byte, 2*len(w.stat))
	}
}

func openat(dirfd int, path []byte, flags int) (int, error) {
	for {
		r, _, e := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&path[0])),
			uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC|flags), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// nextDirent splits the first linux_dirent64 record (ino u64, off s64,
// reclen u16, type u8, NUL-terminated name) off buf.
func nextDirent(buf []byte) (name, rest []byte, ok bool) {
	reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
	if reclen < 19 || reclen > len(buf) {
		return nil, nil, false
	}
	name = buf[19:reclen]
	for i, c := range name {
		if c == 0 {
			name = name[:i]
			break
		}
	}
	return name, buf[reclen:], true
}

func isPID(name []byte) bool {
	if len(name) == 0 || len(name) > 10 || name[0] == '0' {
		return false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
