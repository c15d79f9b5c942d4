//go:build !linux || !(amd64 || arm64)

package textfile

import (
	"os"
	"syscall"
)

// statKey falls back to os.Stat (one allocation per file and tick) where
// no raw fstatat is wired up.
func statKey(path []byte, _ *syscall.Stat_t) (fileKey, error) {
	fi, err := os.Stat(string(path[:len(path)-1]))
	if err != nil {
		return fileKey{}, err
	}
	return fileKey{size: fi.Size(), mtime: fi.ModTime().UnixNano(), regular: fi.Mode().IsRegular()}, nil
}
