package wire

import (
	"io"
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

// rawReader reads a connection with raw read(2) calls through its RawConn
// (read deadlines still apply), for the reason writeAll writes that way:
// a sampler's client reads only the upstream's Acks, and an Ack read
// through a syscall the runtime is told about woke the sleeping sysmon
// thread, which then polled every 20 µs for a while.
type rawReader struct {
	conn net.Conn
	rc   syscall.RawConn
}

// newRawReader returns a reader of conn that makes raw reads if it can.
func newRawReader(conn net.Conn) io.Reader {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return conn
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return conn
	}
	return &rawReader{conn: conn, rc: rc}
}

func (r *rawReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n := 0
	var rerr error
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			m, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch e {
			case 0:
				if n = int(m); n == 0 {
					rerr = io.EOF
				}
				return true
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until readable
			default:
				rerr = e
				return true
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: "tcp", Source: r.conn.LocalAddr(), Addr: r.conn.RemoteAddr(), Err: err}
	}
	return n, err
}
