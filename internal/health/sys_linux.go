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
