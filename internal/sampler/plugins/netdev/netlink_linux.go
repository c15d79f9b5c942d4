//go:build linux

package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	nlInitialBuf = 32 << 10
	nlMaxBuf     = 1 << 20
	// nlMaxDatagrams bounds one dump: a kernel reply that never ends is
	// an error, not a hang.
	nlMaxDatagrams = 1 << 14
)

// errNotifyLost is returned by dump when the kernel dropped link
// notifications (ENOBUFS): names may be stale until the links are dumped.
var errNotifyLost = errors.New("link notifications lost")

// nlSocket is a NETLINK_ROUTE socket that also hears the link group's
// notifications. Every call is a raw, non-blocking syscall: the kernel
// answers a dump while it is asked, so nothing here waits, and a syscall
// the runtime is told about would wake its sysmon thread every tick.
type nlSocket struct {
	fd   int
	seq  uint32
	out  [nlmsgHdrLen + ifinfomsgLen]byte
	buf  []byte
	lost bool // ENOBUFS seen during the current dump
}

func openNetlink() (*nlSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_LINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	return &nlSocket{fd: fd, buf: make([]byte, nlInitialBuf)}, nil
}

func (s *nlSocket) close() error { return unix.Close(s.fd) }

// dump sends a dump request of type typ (with req, at most ifinfomsgLen
// bytes, as its payload) and calls fn for every message that comes back
// until the dump's end: its replies, and the notifications queued before
// and among them. Replies to an earlier, abandoned dump are skipped.
func (s *nlSocket) dump(typ uint16, req []byte, fn func(nlMsg) error) error {
	s.seq++
	s.lost = false
	n := nlmsgHdrLen + len(req)
	binary.NativeEndian.PutUint32(s.out[0:], uint32(n))
	binary.NativeEndian.PutUint16(s.out[4:], typ)
	binary.NativeEndian.PutUint16(s.out[6:], nlmFRequest|nlmFDump)
	binary.NativeEndian.PutUint32(s.out[8:], s.seq)
	binary.NativeEndian.PutUint32(s.out[12:], 0)
	copy(s.out[nlmsgHdrLen:], req)
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(s.fd), uintptr(unsafe.Pointer(&s.out[0])), uintptr(n))
		if e == 0 {
			break
		}
		if e != syscall.EINTR {
			return fmt.Errorf("netlink send: %w", e)
		}
	}
	for range nlMaxDatagrams {
		got, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(s.fd), uintptr(unsafe.Pointer(&s.buf[0])),
			uintptr(len(s.buf)), unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.ENOBUFS:
			s.lost = true
			continue
		default:
			return fmt.Errorf("netlink receive: %w", e)
		}
		if int(got) > len(s.buf) {
			// MSG_TRUNC gave the datagram's real size: it is lost, so this
			// dump fails; the next one has room.
			s.buf = make([]byte, min(max(int(got), 2*len(s.buf)), nlMaxBuf))
			return fmt.Errorf("netlink receive: a %d-byte message was cut short", got)
		}
		data := s.buf[:got]
		for len(data) > 0 {
			m, rest, err := nextMsg(data)
			if err != nil {
				return err
			}
			data = rest
			mine := m.seq == s.seq
			switch {
			case m.typ == nlmsgNoop:
			case m.typ == nlmsgDone && mine, m.typ == nlmsgError && mine:
				errno, err := nlError(m.payload)
				if err != nil {
					return err
				}
				if errno != 0 {
					return fmt.Errorf("netlink dump %d: %w", typ, syscall.Errno(-errno))
				}
				if s.lost {
					return errNotifyLost
				}
				return nil
			case m.typ == nlmsgOverrun:
				s.lost = true
			case m.seq != 0 && !mine:
				// The tail of an abandoned dump.
			default:
				if err := fn(m); err != nil {
					return err
				}
			}
		}
	}
	return fmt.Errorf("netlink dump %d: no end after %d messages", typ, nlMaxDatagrams)
}
