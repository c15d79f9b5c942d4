//go:build !linux

package filesystem

import "syscall"

func statfsRaw(path []byte, st *syscall.Statfs_t) error {
	return syscall.Statfs(string(path[:len(path)-1]), st)
}

func statfsNoBlock(path []byte, st *syscall.Statfs_t) error { return statfsRaw(path, st) }
