// Package kernfs reads /proc and /sys files with few or no allocations:
// a File is opened once and re-read with pread into a buffer it owns, and
// the parse helpers scan bytes in place.
package kernfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// FS is a file-system root such as "/" or a test fixture directory.
type FS struct {
	Root string
}

// NewFS returns an FS rooted at root ("" means "/").
func NewFS(root string) FS {
	if root == "" {
		root = "/"
	}
	return FS{Root: root}
}

// Path joins the root and a path such as "proc/stat".
func (fs FS) Path(elem ...string) string {
	return filepath.Join(append([]string{fs.Root}, elem...)...)
}

// File is a kernel file kept open and re-read from offset 0 on every Read.
// The slice Read returns is owned by the File and valid until the next Read.
type File struct {
	path string
	f    *os.File
	fd   int  // f's descriptor, for raw reads
	raw  bool // NonBlocking and on procfs or sysfs: read with a raw pread
	buf  []byte
	// Reopen forces open/close per read; needed for files whose content is
	// fixed at open time (most /proc/<pid> files are fine either way).
	Reopen bool
	// NonBlocking is the caller's word that reading this file never waits
	// (system-wide /proc files such as /proc/stat; not /proc/<pid>/cmdline,
	// which waits for the target's memory map lock, nor /sys sensors or
	// NIC attributes that call into a driver). Such a file, if it is on
	// procfs or sysfs, is read with a raw pread that the Go
	// scheduler does not see: a syscall it is told about wakes its sysmon
	// thread, and at 10 Hz on a VM those wake-ups cost more than the reads
	// (docs/benchmarks.md). A raw syscall that blocked would stall the
	// whole daemon, hence the file system check; fixtures read normally.
	NonBlocking bool
}

// NewFile returns a File for path; nothing is opened until the first Read.
func NewFile(path string, initialSize int) *File {
	if initialSize <= 0 {
		initialSize = 4096
	}
	return &File{path: path, buf: make([]byte, initialSize)}
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// maxFileSize bounds how much of a kernel file we read (a corrupt or
// hostile fixture must not make the sampler grow without limit).
const maxFileSize = 64 << 20

// Read returns the whole current content of the file.
func (f *File) Read() ([]byte, error) {
	if f.f == nil {
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, err
		}
		f.f = fh
		f.raw, f.fd = false, -1
		if sc, err := fh.SyscallConn(); err == nil {
			_ = sc.Control(func(fd uintptr) {
				f.fd = int(fd)
				f.raw = f.NonBlocking && onProcFS(f.fd)
			})
		}
	}
	for {
		var n int
		var err error
		switch {
		case f.raw:
			n, err = rawPread(f.fd, f.buf)
		case directPread && f.fd >= 0:
			// One pread: os.File.ReadAt reads again until EOF when the
			// first read is short, which is every read of a kernel file.
			n, err = pread(f.fd, f.buf)
		default:
			n, err = f.f.ReadAt(f.buf, 0)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, fmt.Errorf("read %s: %w", f.path, err)
		}
		if n < len(f.buf) {
			data := f.buf[:n]
			if f.Reopen {
				f.Close()
			}
			return data, nil
		}
		if len(f.buf) >= maxFileSize {
			f.Close()
			return nil, fmt.Errorf("read %s: larger than %d bytes", f.path, maxFileSize)
		}
		f.buf = make([]byte, 2*len(f.buf))
	}
}

// Close releases the descriptor; a later Read opens the file again.
func (f *File) Close() error {
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}

// ReadFileInto reads a whole (small) file into buf, growing it if needed,
// and returns the filled slice. Used for files opened once per tick, such
// as /proc/<pid>/stat.
func ReadFileInto(path string, buf []byte) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return buf[:0], err
	}
	defer fh.Close()
	if cap(buf) == 0 {
		buf = make([]byte, 0, 4096)
	}
	buf = buf[:cap(buf)]
	total := 0
	for {
		n, err := fh.Read(buf[total:])
		total += n
		if errors.Is(err, io.EOF) || (err == nil && n == 0) {
			return buf[:total], nil
		}
		if err != nil {
			return buf[:total], err
		}
		if total == len(buf) {
			if total >= maxFileSize {
				return buf[:total], fmt.Errorf("read %s: larger than %d bytes", path, maxFileSize)
			}
			nb := make([]byte, 2*len(buf))
			copy(nb, buf)
			buf = nb
		}
	}
}
