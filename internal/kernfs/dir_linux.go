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
		fd, err := syscall.Open(d.path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", d.path, err)
		}
		d.fd = fd
		d.raw = d.NonBlocking && onProcFS(fd)
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
