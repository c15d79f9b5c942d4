//go:build !linux

package wire

import "net"

// writeAll writes b to conn (raw writes are a Linux optimisation).
func writeAll(conn net.Conn, b []byte) (int, error) { return conn.Write(b) }
