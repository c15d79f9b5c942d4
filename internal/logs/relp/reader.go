package relp

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// initBuf is a connection's buffer while frames are short; it grows to
// the maximum frame only while a frame needs it.
const initBuf = 4 << 10

// maxHeader is the longest header: 9 digits, 32 letters, 9 digits and
// three separators.
const maxHeader = 9 + 1 + 32 + 1 + 9 + 1

// reader splits a connection into RELP frames with a bounded buffer. A
// syslog frame whose data is longer than maxData is cut to maxData (the
// rest is read and dropped), so one oversized message neither blocks the
// session nor costs more memory than the bound.
type reader struct {
	c       net.Conn
	maxData int
	buf     []byte
	start   int
	end     int
	skip    int  // data bytes of a cut frame still to drop
	trailer bool // the cut frame's LF is still to check

	idle, frame time.Duration
	since       time.Time
	stop        *atomic.Bool // shutdown: reads fail at once
}

func newReader(c net.Conn, maxData int, idle, frame time.Duration, stop *atomic.Bool) *reader {
	return &reader{c: c, maxData: maxData, idle: idle, frame: frame, stop: stop}
}

// buffered is how many bytes of further frames are read already: when 0,
// the next call would wait for the peer.
func (r *reader) buffered() int {
	n := r.end - r.start - r.skip
	if r.trailer {
		n--
	}
	return max(n, 0)
}

func (r *reader) partial() bool { return r.end > r.start || r.skip > 0 || r.trailer }

func (r *reader) fill() error {
	if r.start == r.end {
		r.start, r.end = 0, 0
		if cap(r.buf) > initBuf {
			r.buf = nil
		}
	}
	if r.end == len(r.buf) && r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		size := min(max(2*len(r.buf), initBuf), r.maxData+maxHeader+1)
		if size <= len(r.buf) {
			return fmt.Errorf("%w: frame does not fit the buffer", ErrFrame) // not reached: frames are bounded
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	var t time.Time
	switch {
	case r.partial() && r.frame > 0:
		if r.since.IsZero() {
			r.since = time.Now()
		}
		t = r.since.Add(r.frame)
	case !r.partial():
		r.since = time.Time{}
		if r.idle > 0 {
			t = time.Now().Add(r.idle)
		}
	}
	_ = r.c.SetReadDeadline(t)
	// Shutdown sets a past deadline; one set just before would override it.
	if r.stop.Load() {
		_ = r.c.SetReadDeadline(time.Now())
	}
	n, err := r.c.Read(r.buf[r.end:])
	r.end += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// next returns the next frame; data aliases the buffer until the next
// call. cut says the data was cut at maxData.
func (r *reader) next() (h Header, data []byte, cut bool, err error) {
	for r.skip > 0 || r.trailer {
		if r.start == r.end {
			if err := r.fill(); err != nil {
				return h, nil, false, err
			}
		}
		if r.skip > 0 {
			n := min(r.skip, r.end-r.start)
			r.start += n
			r.skip -= n
			continue
		}
		if r.buf[r.start] != '\n' {
			return h, nil, false, fmt.Errorf("%w: want LF after the data of a cut frame, got %q", ErrFrame, r.buf[r.start])
		}
		r.start++
		r.trailer = false
	}
	for {
		h, ok, err := ParseHeader(r.buf[r.start:r.end])
		if err != nil {
			return h, nil, false, err
		}
		if !ok {
			if err := r.fill(); err != nil {
				return h, nil, false, err
			}
			continue
		}
		if h.DataLen == 0 {
			r.start += h.Len
			return h, nil, false, nil
		}
		if h.DataLen > r.maxData && h.Cmd != "syslog" {
			return h, nil, false, fmt.Errorf("%w: %s frame of %d bytes, above the maximum %d", ErrFrame, h.Cmd, h.DataLen, r.maxData)
		}
		keep := min(h.DataLen, r.maxData)
		need := h.Len + keep
		if keep == h.DataLen {
			need++ // the trailer
		}
		for r.end-r.start < need {
			if err := r.fill(); err != nil {
				return h, nil, false, unexpected(err)
			}
		}
		b := r.buf[r.start:]
		data = b[h.Len : h.Len+keep]
		if keep < h.DataLen {
			r.start += need
			r.skip = h.DataLen - keep
			r.trailer = true
			return h, data, true, nil
		}
		if b[need-1] != '\n' {
			return h, nil, false, fmt.Errorf("%w: want LF after %d bytes of data, got %q", ErrFrame, h.DataLen, b[need-1])
		}
		r.start += need
		return h, data, false, nil
	}
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
