//go:build !linux

package wire

import (
	"io"
	"net"
)

// newRawWriter returns conn (raw writes are a Linux optimisation).
func newRawWriter(conn net.Conn) io.Writer { return conn }

// newRawReader returns conn (raw reads are a Linux optimisation).
func newRawReader(conn net.Conn) io.Reader { return conn }
