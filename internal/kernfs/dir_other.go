//go:build !linux

package kernfs

import "errors"

// List needs getdents(2): Linux only.
func (d *Dir) List() ([]DirEntry, error) { return nil, errors.New("directory listing needs Linux") }

// Close is a no-op off Linux.
func (d *Dir) Close() error { return nil }
