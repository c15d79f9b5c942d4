package wire

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// rawWriter writes to a connection with raw write(2) calls through its
// RawConn, where conn is a Linux TCP connection (the socket is non-blocking,
// so a full send buffer parks in the poller as usual, and write deadlines
// still apply). Why: a syscall the runtime is told about wakes its sysmon
// thread when everything was asleep, and a sampler writing one frame a tick
// at 10 Hz would pay that wake-up every tick; see the sampler's kernel timer
// (internal/sampler/wait_linux.go). It is made once per connection, with
// its callback, so a write allocates nothing: the RawConn and a closure per
// write were the sampler's only allocations of a steady tick.
type rawWriter struct {
	conn  net.Conn
	rc    syscall.RawConn // nil: conn.Write
	write func(fd uintptr) bool
	// The write in progress, for write.
	b     []byte
	total int
	werr  error
}

func newRawWriter(conn net.Conn) *rawWriter {
	w := &rawWriter{conn: conn}
	if sc, ok := conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			w.rc = rc
		}
	}
	w.write = w.writeSome
	return w
}

// Write writes all of b, or returns why not.
func (w *rawWriter) Write(b []byte) (int, error) {
	if w.rc == nil {
		return w.conn.Write(b)
	}
	w.b, w.total, w.werr = b, 0, nil
	err := w.rc.Write(w.write)
	w.b = nil
	if err == nil {
		err = w.werr
	}
	if err != nil {
		return w.total, &net.OpError{Op: "write", Net: "tcp", Source: w.conn.LocalAddr(), Addr: w.conn.RemoteAddr(), Err: err}
	}
	return w.total, nil
}

// writeSome is the RawConn callback: false asks to wait until writable.
func (w *rawWriter) writeSome(fd uintptr) bool {
	for w.total < len(w.b) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.b[w.total])), uintptr(len(w.b)-w.total))
		switch e {
		case 0:
			w.total += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.werr = e
			return true
		}
	}
	return true
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
