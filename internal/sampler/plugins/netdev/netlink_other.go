//go:build !linux

package netdev

import (
	"errors"
	"fmt"
)

var errNotifyLost = errors.New("link notifications lost")

type nlSocket struct{}

func openNetlink() (*nlSocket, error) {
	return nil, fmt.Errorf("netlink: %w", errors.ErrUnsupported)
}

func (*nlSocket) close() error { return nil }

func (*nlSocket) dump(uint16, []byte, func(nlMsg) error) error { return errors.ErrUnsupported }
