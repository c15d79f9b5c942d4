package appio

import (
	"context"

	"golang.org/x/sys/unix"
)

// watchMounts calls changed each time the mount table of the sampler's
// namespace changes: the kernel marks /proc/self/mountinfo readable with
// POLLPRI then, so a file system mounted after start (a job's scratch, a
// `vigil iofs` mount) gets its own series at once rather than at the next
// rescan. It returns false at once when path is not procfs (a fixture
// tree under --root), leaving the rescan alone to notice changes.
func watchMounts(ctx context.Context, path string, changed func()) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil || st.Type != unix.PROC_SUPER_MAGIC {
		return false
	}
	buf := make([]byte, 64<<10)
	drain := func() { // reading to the end re-arms the event on this fd
		_, _ = unix.Seek(fd, 0, 0)
		for {
			if n, err := unix.Read(fd, buf); n <= 0 || err != nil {
				return
			}
		}
	}
	drain()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
	for ctx.Err() == nil {
		n, err := unix.Poll(fds, 1000) // a second: how long a stop waits
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return true
		}
		if fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0 {
			drain()
			changed()
		}
	}
	return true
}
