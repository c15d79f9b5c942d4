package netstat

import (
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("unexpected format")

// maxFields bounds the fields of one protocol line (TcpExt has ~130).
const maxFields = 1024

// ParsePairs scans /proc/net/netstat or /proc/net/snmp content: pairs of
// "Proto: Name1 Name2 ..." and "Proto: v1 v2 ..." lines. fn gets each pair's
// index, its header line (for callers that cache by it), the protocol and
// the field names and values; slices are only valid during fn.
func ParsePairs(data []byte, names, vals [][]byte, fn func(pair int, header, proto []byte, names, vals [][]byte)) error {
	names, vals = names[:cap(names)], vals[:cap(vals)]
	for pair, n := 0, 1; len(data) > 0; pair, n = pair+1, n+2 {
		var hdr, val []byte
		hdr, data = kernfs.NextLine(data)
		if len(kernfs.TrimSpace(hdr)) == 0 {
			continue
		}
		val, data = kernfs.NextLine(data)
		hp, hrest, ok1 := kernfs.Cut(hdr, ':')
		vp, vrest, ok2 := kernfs.Cut(val, ':')
		if !ok1 || !ok2 || string(hp) != string(vp) {
			return fmt.Errorf("lines %d-%d: want a \"Proto: names\" and a \"Proto: values\" line: %w", n, n+1, ErrFormat)
		}
		nn := split(hrest, names)
		nv := split(vrest, vals)
		if nn != nv || nn > len(names) {
			return fmt.Errorf("lines %d-%d (%s): %d names but %d values: %w", n, n+1, clip(hp), nn, nv, ErrFormat)
		}
		fn(pair, hdr, hp, names[:nn], vals[:nv])
	}
	return nil
}

// split stores the fields of b into dst and returns how many there are
// (more than len(dst) when they do not fit).
func split(b []byte, dst [][]byte) int {
	n := 0
	for {
		var f []byte
		if f, b = kernfs.NextField(b); len(f) == 0 {
			return n
		}
		if n < len(dst) {
			dst[n] = f
		}
		n++
	}
}

// ParseSNMP6 scans /proc/net/snmp6 content ("Ip6InReceives  123" lines)
// and calls fn with each line's index, name and value field.
func ParseSNMP6(data []byte, fn func(i int, name, val []byte)) error {
	for i, n := 0, 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		var f [3][]byte
		k := kernfs.Fields(line, f[:])
		if k == 0 {
			continue
		}
		if k != 2 {
			return fmt.Errorf("line %d: %d fields, want \"name value\": %w", n, k, ErrFormat)
		}
		fn(i, f[0], f[1])
		i++
	}
	return nil
}

// SplitSNMP6 splits an snmp6 name after its "6": "Ip6InReceives" is
// protocol "Ip6" and field "InReceives", "Udp6InErrors" is "Udp6" and
// "InErrors" (node_exporter's rule). ok is false without a "6".
func SplitSNMP6(name []byte) (proto, field []byte, ok bool) {
	for i, c := range name {
		if c == '6' {
			return name[:i+1], name[i+1:], true
		}
	}
	return nil, nil, false
}

// ParseValue reads a counter, which may be negative (Tcp MaxConn is -1)
// or beyond int64.
func ParseValue(b []byte) (float64, error) {
	if v, err := kernfs.ParseInt(b); err == nil {
		return float64(v), nil
	}
	v, err := kernfs.ParseUint(b)
	if err != nil {
		return 0, fmt.Errorf("value %q: want an integer: %w", clip(b), ErrFormat)
	}
	return float64(v), nil
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
