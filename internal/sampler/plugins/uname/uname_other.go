//go:build !linux

package uname

import "errors"

const unameSupported = false

type utsBuf struct{}

func (*utsBuf) read(*[NumFields][]byte) error { return errors.New("uname(2) needs Linux") }
