package store

import "syscall"

// freeBytes is the space on dir's file system that an unprivileged writer
// may still use (root's reserved blocks excluded, as df shows).
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}
