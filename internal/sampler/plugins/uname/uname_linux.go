//go:build linux

package uname

import (
	"bytes"
	"syscall"
	"unsafe"
)

const unameSupported = true

// utsBuf holds a uname(2) answer; the plugin owns it so a tick does not
// allocate.
type utsBuf struct {
	u syscall.Utsname
}

// read fills vals with slices of b's own storage.
func (b *utsBuf) read(vals *[NumFields][]byte) error {
	// uname cannot block: a raw call spares the scheduler's bookkeeping.
	if _, _, e := syscall.RawSyscall(syscall.SYS_UNAME, uintptr(unsafe.Pointer(&b.u)), 0, 0); e != 0 {
		return e
	}
	// The fields are [65]int8 or [65]uint8 depending on the architecture;
	// both are 65 bytes.
	for i, p := range [NumFields]unsafe.Pointer{
		Domainname: unsafe.Pointer(&b.u.Domainname), Machine: unsafe.Pointer(&b.u.Machine),
		Nodename: unsafe.Pointer(&b.u.Nodename), Release: unsafe.Pointer(&b.u.Release),
		Sysname: unsafe.Pointer(&b.u.Sysname), Version: unsafe.Pointer(&b.u.Version),
	} {
		v := (*[65]byte)(p)[:]
		if n := bytes.IndexByte(v, 0); n >= 0 {
			v = v[:n]
		}
		vals[i] = v
	}
	return nil
}
