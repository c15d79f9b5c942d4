//go:build linux

package kernfs

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"
)

// List returns the directory's entries other than "." and "..".
func (d *Dir) List() ([]DirEntry, error) {
	if d.fd < 0 {
		if err := d.open(); err != nil {
			return nil, err
		}
	} else if err := d.rewind(); err != nil {
		d.Close()
		return nil, fmt.Errorf("rewind %s: %w", d.path, err)
	}
	if d.buf == nil {
		d.buf = make([]byte, 8192)
	}
	used := 0
	for {
		if len(d.buf)-used < 4096 { // room for at least one more large record
			if len(d.buf) >= maxDirBytes {
				d.Close()
				return nil, fmt.Errorf("list %s: larger than %d bytes", d.path, maxDirBytes)
			}
			nb := make([]byte, 2*len(d.buf))
			copy(nb, d.buf[:used])
			d.buf = nb
		}
		n, err := d.getdents(d.buf[used:])
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("list %s: %w", d.path, err)
		}
		if n <= 0 {
			break
		}
		used += n
	}
	d.ents = d.ents[:0]
	for b := d.buf[:used]; len(b) >= 19; {
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			return nil, fmt.Errorf("list %s: bad record length %d", d.path, reclen)
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
		d.ents = append(d.ents, DirEntry{Name: name, Type: typ})
	}
	return d.ents, nil
}

// Size returns the st_size fstat(2) reports for the directory, on the
// descriptor List uses. For /proc/<pid>/fd it is the number of open
// descriptors since Linux 6.2 (0 before): one syscall where a listing makes
// procfs build an entry per descriptor.
func (d *Dir) Size() (int64, error) {
	if d.fd < 0 {
		if err := d.open(); err != nil {
			return 0, err
		}
	}
	var st syscall.Stat_t
	if !d.raw {
		if err := syscall.Fstat(d.fd, &st); err != nil {
			return 0, fmt.Errorf("stat %s: %w", d.path, err)
		}
		return st.Size, nil
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_FSTAT, uintptr(d.fd), uintptr(unsafe.Pointer(&st)), 0); e != 0 {
		return 0, fmt.Errorf("stat %s: %w", d.path, e)
	}
	return st.Size, nil
}

func (d *Dir) open() error {
	fd, err := syscall.Open(d.path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", d.path, err)
	}
	d.fd = fd
	d.raw = d.NonBlocking && onProcFS(fd)
	return nil
}

// Close releases the descriptor; a later List opens the directory again.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := syscall.Close(d.fd)
	d.fd = -1
	return err
}

func (d *Dir) rewind() error {
	if !d.raw {
		_, err := syscall.Seek(d.fd, 0, 0)
		return err
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_LSEEK, uintptr(d.fd), 0, 0); e != 0 {
		return e
	}
	return nil
}

func (d *Dir) getdents(buf []byte) (int, error) {
	if !d.raw {
		return syscall.Getdents(d.fd, buf)
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_GETDENTS64, uintptr(d.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, e
	}
}
