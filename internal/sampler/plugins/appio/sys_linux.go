package appio

import (
	"errors"
	"os"
	"syscall"
)

// peerCred returns the pid and uid the kernel recorded for the peer of a
// Unix socket (SO_PEERCRED): what the client cannot lie about.
func peerCred(rc syscall.RawConn) (pid, uid uint32, err error) {
	var cred *syscall.Ucred
	var serr error
	if err := rc.Control(func(fd uintptr) {
		cred, serr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, serr
	}
	if cred.Pid <= 0 {
		return 0, 0, errors.New("SO_PEERCRED has no pid")
	}
	return uint32(cred.Pid), cred.Uid, nil
}

// recvMsg receives one message into buf without blocking. n is the
// message's real length (MSG_TRUNC), which may exceed len(buf); again
// says nothing was waiting; n == 0 is the peer closing.
func recvMsg(fd uintptr, buf []byte) (n int, again bool, err error) {
	n, _, err = syscall.Recvfrom(int(fd), buf, syscall.MSG_TRUNC|syscall.MSG_DONTWAIT)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
		return 0, true, nil
	}
	return n, false, err
}

const supported = true

// inode is a file's inode number, 0 if unknown.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
