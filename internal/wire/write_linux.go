package wire

import (
	"net"
	"syscall"
	"unsafe"
)

// writeAll writes b to conn. On Linux TCP connections it makes the write(2)
// calls as raw syscalls through the connection's RawConn (the socket is
// non-blocking, so a full send buffer parks in the poller as usual, and
// write deadlines still apply). Why: a syscall the runtime is told about
// wakes its sysmon thread when everything was asleep, and a sampler
// writing one frame a tick at 10 Hz would pay that wake-up every tick; see
// the sampler's kernel timer (internal/sampler/wait_linux.go).
func writeAll(conn net.Conn, b []byte) (int, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn.Write(b)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return conn.Write(b)
	}
	total := 0
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for total < len(b) {
			n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[total])), uintptr(len(b)-total))
			switch e {
			case 0:
				total += int(n)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until writable
			default:
				werr = e
				return true
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return total, &net.OpError{Op: "write", Net: "tcp", Source: conn.LocalAddr(), Addr: conn.RemoteAddr(), Err: err}
	}
	return total, nil
}
