// Package relp receives syslog over RELP, the Reliable Event Logging
// Protocol of rsyslog's omrelp (librelp): every message is acknowledged
// only once it is durable in the log store, and a sender resends what was
// not acknowledged when the connection breaks, so a crash of the server
// loses nothing.
//
// A frame is
//
//	TXNR SP COMMAND SP DATALEN [SP DATA] LF
//
// with TXNR 1-9 digits (the client's transaction number, 1, 2, 3, ...
// wrapping after 999999999 to 1), COMMAND 1-32 letters, DATALEN 1-9
// digits and DATA present only when DATALEN is above 0. The client sends
// "open" (offers such as relp_version=0, commands=syslog, one per line),
// "syslog" frames and "close"; the server answers each with "rsp" of the
// same TXNR, whose data is a status code and text ("200 OK"), and may end
// a session with "0 serverclose 0".
package relp

import (
	"errors"
	"fmt"
	"strconv"
)

// Errors of the frame parser.
var (
	// ErrFrame is a frame that does not follow the grammar; the stream
	// cannot be resynchronised after it.
	ErrFrame = errors.New("relp: invalid frame")
)

// Header is the part of a frame before its data.
type Header struct {
	Txnr    uint32
	Cmd     string
	DataLen int
	// Len is the header's length in bytes, through the SP before the data,
	// or through the LF of a frame without data.
	Len int
}

const (
	maxTxnrDigits = 9
	maxCmd        = 32
	maxLenDigits  = 9
)

// ParseHeader parses the header at the start of b. ok is false, with a
// nil error, when b ends before the header does.
func ParseHeader(b []byte) (h Header, ok bool, err error) {
	i := 0
	txnr, i, ok, err := number(b, i, maxTxnrDigits, "transaction number")
	if !ok || err != nil {
		return h, ok, err
	}
	h.Txnr = uint32(txnr)
	start := i
	for ; i < len(b) && isAlpha(b[i]); i++ {
		if i-start == maxCmd {
			return h, false, fmt.Errorf("%w: command longer than %d letters", ErrFrame, maxCmd)
		}
	}
	if i == len(b) {
		return h, false, nil
	}
	if i == start || b[i] != ' ' {
		return h, false, fmt.Errorf("%w: want command letters and a space at byte %d, got %q", ErrFrame, i, b[i])
	}
	h.Cmd = string(b[start:i])
	n, i, ok, err := number(b, i+1, maxLenDigits, "data length")
	if !ok || err != nil {
		return h, ok, err
	}
	h.DataLen = int(n)
	// number stopped at a non-digit: the space before the data, or the
	// trailer of an empty frame.
	i-- // number consumed the terminator; look at it again
	switch {
	case h.DataLen == 0 && b[i] == '\n':
	case h.DataLen > 0 && b[i] == ' ':
	default:
		return h, false, fmt.Errorf("%w: data length %d followed by %q", ErrFrame, h.DataLen, b[i])
	}
	h.Len = i + 1
	return h, true, nil
}

// number reads 1..max digits starting at b[i] and the byte after them,
// which must not be a digit; it returns the index after that byte.
func number(b []byte, i, max int, what string) (n uint64, next int, ok bool, err error) {
	start := i
	for ; i < len(b) && isDigit(b[i]); i++ {
		if i-start == max {
			return 0, 0, false, fmt.Errorf("%w: %s longer than %d digits", ErrFrame, what, max)
		}
		n = n*10 + uint64(b[i]-'0')
	}
	if i == len(b) {
		return 0, 0, false, nil
	}
	if i == start {
		return 0, 0, false, fmt.Errorf("%w: want %s at byte %d, got %q", ErrFrame, what, i, b[i])
	}
	if what == "transaction number" && b[i] != ' ' {
		return 0, 0, false, fmt.Errorf("%w: want a space after the %s, got %q", ErrFrame, what, b[i])
	}
	return n, i + 1, true, nil
}

// ParseFrame parses one whole frame at the start of b: its header, data
// (aliasing b) and trailer, and n, the bytes it took. n is 0, with a nil
// error, when b ends before the frame does. Data longer than maxData is an
// error wrapping ErrFrame.
func ParseFrame(b []byte, maxData int) (h Header, data []byte, n int, err error) {
	h, ok, err := ParseHeader(b)
	if !ok || err != nil {
		return h, nil, 0, err
	}
	if h.DataLen == 0 {
		return h, nil, h.Len, nil
	}
	if h.DataLen > maxData {
		return h, nil, 0, fmt.Errorf("%w: %d bytes of data, above the maximum %d", ErrFrame, h.DataLen, maxData)
	}
	end := h.Len + h.DataLen
	if len(b) <= end {
		return h, nil, 0, nil
	}
	if b[end] != '\n' {
		return h, nil, 0, fmt.Errorf("%w: want LF after %d bytes of data, got %q", ErrFrame, h.DataLen, b[end])
	}
	return h, b[h.Len:end], end + 1, nil
}

// AppendFrame appends a frame to dst.
func AppendFrame(dst []byte, txnr uint32, cmd string, data []byte) []byte {
	dst = strconv.AppendUint(dst, uint64(txnr), 10)
	dst = append(dst, ' ')
	dst = append(dst, cmd...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(data)), 10)
	if len(data) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, data...)
	}
	return append(dst, '\n')
}

// nextTxnr is the transaction number after t (librelp wraps to 1).
func nextTxnr(t uint32) uint32 {
	if t >= 999999999 {
		return 1
	}
	return t + 1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
