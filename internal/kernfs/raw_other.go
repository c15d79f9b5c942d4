//go:build !linux

package kernfs

import "errors"

func onProcFS(int) bool { return false }

func rawPread(int, []byte) (int, error) { return 0, errors.New("raw reads need Linux") }

const directPread = false

func pread(int, []byte) (int, error) { return 0, errors.New("direct reads need Linux") }
