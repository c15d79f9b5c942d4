//go:build !linux

package syslog

import (
	"errors"
	"net"
)

const oobSize = 0

func setReadBuffer(c *net.UDPConn, n int) (int, error) { return n, c.SetReadBuffer(n) }

func enableDropCount(*net.UDPConn) error {
	return errors.New("SO_RXQ_OVFL is Linux only")
}

func parseDropCount([]byte) (uint32, bool) { return 0, false }
