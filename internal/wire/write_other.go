//go:build !linux

package wire

import (
	"io"
	"net"
)

// writeAll writes b to conn (raw writes are a Linux optimisation).
func writeAll(conn net.Conn, b []byte) (int, error) { return conn.Write(b) }

// newRawReader returns conn (raw reads are a Linux optimisation).
func newRawReader(conn net.Conn) io.Reader { return conn }
