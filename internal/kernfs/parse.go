package kernfs

import (
	"bytes"
	"errors"
	"math"
	"strconv"
)

// ErrSyntax is returned for a number that cannot be parsed.
var ErrSyntax = errors.New("invalid number")

// ParseUint parses a non-negative decimal integer without allocating.
func ParseUint(b []byte) (uint64, error) {
	if len(b) == 0 {
		return 0, ErrSyntax
	}
	var n uint64
	if len(b) <= 19 { // cannot overflow: skip the per-digit check
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, ErrSyntax
			}
			n = n*10 + uint64(c-'0')
		}
		return n, nil
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, ErrSyntax
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, ErrSyntax
		}
		n = n*10 + d
	}
	return n, nil
}

// ParseInt parses a signed decimal integer without allocating.
func ParseInt(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	u, err := ParseUint(b)
	if err != nil || u > math.MaxInt64 {
		return 0, ErrSyntax
	}
	if neg {
		return -int64(u), nil
	}
	return int64(u), nil
}

// ParseFixed parses a decimal such as "0.52" or "12" (no exponent) without
// allocating, to the same float64 as strconv.ParseFloat: digits and scale
// are exact integers, so one division rounds correctly. Enough for
// /proc/loadavg and similar.
func ParseFixed(b []byte) (float64, error) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, ErrSyntax
	}
	var m uint64 // all digits, without the point
	var scale float64 = 1
	exact := true // m < 2^53 and scale a power of ten float64 holds exactly
	seenPoint := false
	for i, c := range b {
		switch {
		case c == '.' && !seenPoint && i+1 < len(b):
			seenPoint = true
		case c >= '0' && c <= '9':
			if m > (1<<53)/10 {
				exact = false
				if !seenPoint && m > math.MaxUint64/10-10 {
					return 0, ErrSyntax
				}
			}
			if exact {
				m = m*10 + uint64(c-'0')
				if seenPoint {
					scale *= 10
				}
			}
		default:
			return 0, ErrSyntax
		}
	}
	v := float64(m) / scale
	if !exact || scale > 1e22 {
		var err error
		if v, err = strconv.ParseFloat(string(b), 64); err != nil {
			return 0, ErrSyntax
		}
	}
	if neg {
		v = -v
	}
	return v, nil
}

// NextLine splits off the first line of b (without the newline).
func NextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// NextField skips leading blanks and returns the next blank-separated field.
// field is empty when the line is exhausted.
func NextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	return b[i:j], b[j:]
}

// Fields splits line into at most len(dst) blank-separated fields, stored
// into dst, and returns how many were found. It does not allocate.
func Fields(line []byte, dst [][]byte) int {
	n := 0
	for n < len(dst) {
		var f []byte
		f, line = NextField(line)
		if len(f) == 0 {
			break
		}
		dst[n] = f
		n++
	}
	return n
}

// TrimSpace trims blanks and newlines at both ends.
func TrimSpace(b []byte) []byte {
	for len(b) > 0 && (isSpace(b[0]) || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (isSpace(b[len(b)-1]) || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// Cut splits b around the first sep byte.
func Cut(b []byte, sep byte) (before, after []byte, found bool) {
	for i, c := range b {
		if c == sep {
			return b[:i], b[i+1:], true
		}
	}
	return b, nil, false
}

// ParseHex parses 1 to maxDigits hexadecimal digits, without a prefix and
// without allocating (softnet_stat columns, conntrack counters).
func ParseHex(b []byte, maxDigits int) (uint64, bool) {
	if len(b) == 0 || len(b) > maxDigits || maxDigits > 16 {
		return 0, false
	}
	var x uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		x = x<<4 | uint64(c)
	}
	return x, true
}
