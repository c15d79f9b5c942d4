package health

import "syscall"

// statfs returns the size of a file system and the bytes available to
// unprivileged users (what df shows as Avail).
func statfs(path string) (total, avail uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// readComm reads a /proc/<pid>/comm (at most 16 bytes) with three system
// calls, where os.Open would add a poller registration and a read to EOF:
// a process check reads one per process.
func readComm(path string, buf []byte) ([]byte, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		return buf[:max(n, 0)], err == nil
	}
}
