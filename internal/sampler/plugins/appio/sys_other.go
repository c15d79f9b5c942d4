//go:build !linux

package appio

import (
	"errors"
	"os"
	"syscall"
)

var errNotLinux = errors.New("appio needs Linux (SO_PEERCRED)")

func peerCred(syscall.RawConn) (pid, uid uint32, err error) { return 0, 0, errNotLinux }

func recvMsg(uintptr, []byte) (int, bool, error) { return 0, false, errNotLinux }

const supported = false

func inode(os.FileInfo) uint64 { return 0 }
