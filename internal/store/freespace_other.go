//go:build !linux

package store

import "errors"

func freeBytes(string) (int64, error) {
	return 0, errors.New("free space unknown on this platform")
}
