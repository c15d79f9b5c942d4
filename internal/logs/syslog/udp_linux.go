package syslog

import (
	"encoding/binary"
	"net"
	"syscall"
)

// oobSize holds one SO_RXQ_OVFL control message.
var oobSize = syscall.CmsgSpace(4)

// setReadBuffer asks for n bytes of receive buffer, beyond
// net.core.rmem_max when the process may (SO_RCVBUFFORCE), and returns
// what the kernel granted (it reports twice the usable size).
func setReadBuffer(c *net.UDPConn, n int) (int, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var got int
	var serr error
	err = rc.Control(func(fd uintptr) {
		if syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n) != nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}
		v, e := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
		if e == nil {
			got = v / 2
		} else if serr == nil {
			serr = e
		}
	})
	if err == nil {
		err = serr
	}
	return got, err
}

// enableDropCount makes the kernel attach its count of dropped datagrams
// to every datagram read (SO_RXQ_OVFL, Linux 2.6.33).
func enableDropCount(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RXQ_OVFL, 1)
	}); err != nil {
		return err
	}
	return serr
}

// parseDropCount returns the socket's drop counter from a datagram's
// control messages; ok is false when there is none (no drop yet).
func parseDropCount(oob []byte) (total uint32, ok bool) {
	if len(oob) == 0 {
		return 0, false
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_RXQ_OVFL && len(m.Data) >= 4 {
			return binary.NativeEndian.Uint32(m.Data), true
		}
	}
	return 0, false
}
