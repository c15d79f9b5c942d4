//go:build !linux

package filesystem

import "os"

// watcher is a no-op outside Linux: the mount table is re-read every
// mount_refresh only.
type watcher struct{}

func newWatcher(path string) (watcher, error) {
	_, err := os.Stat(path)
	return watcher{}, err
}

func (w *watcher) changed() bool { return false }

func (w *watcher) close() error { return nil }
