package syslog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrRejected marks a frame that was skipped (its octet count is above the
// maximum). Reading can go on after it.
var ErrRejected = errors.New("frame rejected")

// DefaultMaxFrame is the default largest message; RFC 5425 asks receivers
// to take at least 8 KiB, rsyslog's default is 8 KiB, Java stack traces are
// longer.
const DefaultMaxFrame = 64 << 10

// initBuf is a connection's buffer while its messages are short: an idle
// connection costs this, not MaxFrame (3,000 idle senders used to hold
// 64 KiB each).
const initBuf = 4 << 10

// Deadliner is the part of net.Conn the Framer uses for timeouts.
type Deadliner interface {
	SetReadDeadline(t time.Time) error
}

// Framer splits a TCP stream into frames, choosing per frame between octet
// counting (RFC 6587 3.4.1, "LEN SP MSG") and newline termination: a frame
// that starts with a digit run followed by a space is octet counted.
//
// Its buffer starts at 4 KiB and grows to the maximum frame only while a
// frame needs it or the sender keeps it full.
type Framer struct {
	r       io.Reader
	max     int
	buf     []byte
	start   int  // first unread byte
	end     int  // end of read bytes
	scanned int  // bytes after start known to hold no newline
	discard bool // skipping the rest of an overlong line
	skip    int  // bytes of a rejected octet frame still to skip
	grow    bool // the last read filled the buffer: a busy sender

	dl          Deadliner
	idle, frame time.Duration
	since       time.Time // when the framer began waiting for the rest of a frame
}

// NewFramer reads from r; frames longer than max bytes are cut (newline
// framing) or rejected (octet counting).
func NewFramer(r io.Reader, max int) *Framer {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &Framer{r: r, max: max}
}

// SetTimeouts makes every read wait at most idle when no frame is begun,
// and a begun frame complete within frame of the first wait for its rest
// (0 disables either). A slow sender cannot hold a partial frame, and its
// buffer, for longer than that.
func (f *Framer) SetTimeouts(d Deadliner, idle, frame time.Duration) {
	f.dl, f.idle, f.frame = d, idle, frame
}

// Buffered reports how many bytes can be read without blocking.
func (f *Framer) Buffered() int { return f.end - f.start }

// Partial reports whether the framer holds or skips part of a frame: a
// read timeout then is a frame timeout, not an idle one.
func (f *Framer) Partial() bool { return f.end > f.start || f.discard || f.skip > 0 }

// fill reads more bytes, making room first; it fails only when nothing
// was read.
func (f *Framer) fill() error {
	limit := f.max + 16
	if f.start > 0 && f.start == f.end {
		f.start, f.end = 0, 0
		if !f.grow && cap(f.buf) > initBuf {
			f.buf = nil // drained: give a large buffer back
		}
	}
	if f.end == len(f.buf) && f.start > 0 {
		n := copy(f.buf, f.buf[f.start:f.end])
		f.start, f.end = 0, n
	}
	if f.end == len(f.buf) || (f.grow && len(f.buf) < limit) {
		if size := min(max(2*len(f.buf), initBuf), limit); size > len(f.buf) {
			nb := make([]byte, size)
			copy(nb, f.buf[f.start:f.end])
			f.buf, f.end, f.start = nb, f.end-f.start, 0
		}
	}
	if f.dl != nil {
		var t time.Time
		switch {
		case f.Partial() && f.frame > 0:
			if f.since.IsZero() {
				f.since = time.Now()
			}
			t = f.since.Add(f.frame)
		case !f.Partial():
			f.since = time.Time{}
			if f.idle > 0 {
				t = time.Now().Add(f.idle)
			}
		}
		_ = f.dl.SetReadDeadline(t)
	}
	n, err := f.r.Read(f.buf[f.end:])
	f.end += n
	f.grow = f.end == len(f.buf)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// Next returns the next frame without its terminator. The slice is owned by
// the Framer and valid until the next call. truncated says a newline frame
// was cut at the maximum. An error wrapping ErrRejected is not fatal; io.EOF
// ends the stream; other errors come from the reader.
func (f *Framer) Next() (frame []byte, truncated bool, err error) {
	for {
		if f.skip > 0 {
			n := min(f.skip, f.end-f.start)
			f.start += n
			f.skip -= n
			f.scanned = 0
			if f.skip > 0 {
				if err := f.fill(); err != nil {
					return nil, false, err
				}
			}
			continue
		}
		if f.discard {
			if i := bytes.IndexByte(f.buf[f.start:f.end], '\n'); i >= 0 {
				f.start += i + 1
				f.discard = false
				continue
			}
			f.start = f.end
			f.scanned = 0
			if err := f.fill(); err != nil {
				return nil, false, err
			}
			continue
		}
		if f.start == f.end {
			if err := f.fill(); err != nil {
				return nil, false, err
			}
			continue
		}
		if c := f.buf[f.start]; isDigit(c) && c != '0' {
			n, hdr, st := octetHeader(f.buf[f.start:f.end])
			if st == needMore {
				if err := f.fill(); err != nil {
					if errors.Is(err, io.EOF) {
						return f.line(err) // a short digit run at the end
					}
					return nil, false, err
				}
				continue
			}
			if st == isOctet {
				return f.octetFrame(n, hdr)
			}
		}
		frame, truncated, err, ok := f.tryLine()
		if ok {
			return frame, truncated, err
		}
		if err := f.fill(); err != nil {
			return f.line(err)
		}
	}
}

const (
	notOctet = iota
	isOctet
	needMore
)

// octetHeader looks for "LEN SP" at the start of b.
func octetHeader(b []byte) (n, hdr, status int) {
	for i := 0; i < 11; i++ {
		if i >= len(b) {
			return 0, 0, needMore
		}
		c := b[i]
		if c == ' ' && i > 0 {
			return n, i + 1, isOctet
		}
		if !isDigit(c) {
			return 0, 0, notOctet
		}
		n = n*10 + int(c-'0')
	}
	return 0, 0, notOctet
}

func (f *Framer) octetFrame(n, hdr int) ([]byte, bool, error) {
	f.start += hdr
	f.scanned = 0
	if n > f.max {
		// Skip it; a stream that ends inside it ends at the next call.
		f.skip = n
		return nil, false, fmt.Errorf("%w: octet count %d above maximum %d", ErrRejected, n, f.max)
	}
	for f.end-f.start < n {
		if err := f.fill(); err != nil {
			return nil, false, fmt.Errorf("read octet-counted frame of %d bytes: %w", n, unexpected(err))
		}
	}
	b := f.buf[f.start : f.start+n]
	f.start += n
	return b, false, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// tryLine returns a newline frame if the buffer holds one, or a cut one
// if the line is already longer than the maximum; ok is false when more
// bytes are needed.
func (f *Framer) tryLine() (frame []byte, truncated bool, err error, ok bool) {
	b := f.buf[f.start:f.end]
	if i := bytes.IndexByte(b[f.scanned:], '\n'); i >= 0 {
		i += f.scanned
		f.start += i + 1
		f.scanned = 0
		if i > f.max {
			return b[:f.max], true, nil, true
		}
		return b[:i], false, nil, true
	}
	f.scanned = len(b)
	if len(b) > f.max {
		// Cut at max, drop the rest of the line.
		f.start = f.end
		f.scanned = 0
		f.discard = true
		return b[:f.max], true, nil, true
	}
	return nil, false, nil, false
}

// line ends the stream after a read error: at EOF the buffered bytes are
// the last message, sent without a newline.
func (f *Framer) line(err error) ([]byte, bool, error) {
	b := f.buf[f.start:f.end]
	if !errors.Is(err, io.EOF) || len(b) == 0 {
		return nil, false, err
	}
	f.start = f.end
	f.scanned = 0
	if len(b) > f.max {
		return b[:f.max], true, nil
	}
	return b, false, nil
}
