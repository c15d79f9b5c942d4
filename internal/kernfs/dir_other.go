//go:build !linux

package kernfs

import "errors"

// List needs getdents(2): Linux only.
func (d *Dir) List() ([]DirEntry, error) { return nil, errors.New("directory listing needs Linux") }

// Size needs fstat on a kept descriptor: Linux only.
func (d *Dir) Size() (int64, error) { return 0, errors.New("directory size needs Linux") }

// Close is a no-op off Linux.
func (d *Dir) Close() error { return nil }
