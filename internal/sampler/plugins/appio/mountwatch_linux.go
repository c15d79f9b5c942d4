package appio

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// watchMounts calls changed each time the mount table of the sampler's
// namespace changes, so a file system mounted after start (a job's
// scratch, a `vigil iofs` mount) gets its own series at once rather than
// at the next rescan. It returns false at once when path is not procfs (a
// fixture tree under --root) or cannot be polled, leaving the rescan alone
// to notice changes.
//
// The kernel wakes pollers of /proc/self/mountinfo on every change to the
// table. The file is waited on through the runtime's poller (edge-
// triggered), and changed is also called at the start (perhaps twice: the
// poller may report the file readable as it joins), for a change before
// the file joined the poller. A blocking poll(2) here, as before, kept a
// thread in a system call the runtime counts, which woke the runtime's
// sysmon thread and handed the sampler's only P between threads: at 1 Hz
// that cost more CPU than some plugins (docs/benchmarks.md, "Idle wake-ups").
func watchMounts(ctx context.Context, path string, changed func()) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil || st.Type != unix.PROC_SUPER_MAGIC {
		unix.Close(fd)
		return false
	}
	f := os.NewFile(uintptr(fd), path) // non-blocking: it joins the poller
	defer f.Close()
	if f.SetReadDeadline(time.Time{}) != nil {
		return false // not pollable after all
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	// One RawRead for the watcher's life: changed runs inside the callback,
	// which then parks again. A change reported while changed runs marks
	// the poller ready and the next park returns at once; a RawRead per
	// change would reset that mark and miss the change.
	_ = rc.Read(func(uintptr) bool {
		if ctx.Err() == nil {
			changed()
		}
		return false
	})
	return true // ctx ended: the deadline above ended the read
}
