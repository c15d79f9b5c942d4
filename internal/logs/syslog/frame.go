package syslog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ErrRejected marks a frame that was skipped (its octet count is above the
// maximum). Reading can go on after it.
var ErrRejected = errors.New("frame rejected")

// DefaultMaxFrame is the default largest message; RFC 5425 asks receivers
// to take at least 8 KiB, rsyslog's default is 8 KiB, Java stack traces are
// longer.
const DefaultMaxFrame = 64 << 10

// Framer splits a TCP stream into frames, choosing per frame between octet
// counting (RFC 6587 3.4.1, "LEN SP MSG") and newline termination: a frame
// that starts with a digit run followed by a space is octet counted.
type Framer struct {
	r        *bufio.Reader
	max      int
	discard  bool // skipping the rest of an overlong line
	overflow []byte
}

// NewFramer reads from r; frames longer than max bytes are cut (newline
// framing) or rejected (octet counting).
func NewFramer(r io.Reader, max int) *Framer {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &Framer{r: bufio.NewReaderSize(r, max+16), max: max}
}

// Buffered reports how many bytes can be read without blocking.
func (f *Framer) Buffered() int { return f.r.Buffered() }

// Next returns the next frame without its terminator. The slice is owned by
// the Framer and valid until the next call. truncated says a newline frame
// was cut at the maximum. An error wrapping ErrRejected is not fatal; io.EOF
// ends the stream; other errors come from the reader.
func (f *Framer) Next() (frame []byte, truncated bool, err error) {
	for {
		c, err := f.r.Peek(1)
		if err != nil {
			return nil, false, err
		}
		if f.discard {
			if err := f.skipLine(); err != nil {
				return nil, false, err
			}
			continue
		}
		if isDigit(c[0]) && c[0] != '0' {
			if n, hdr, ok := f.octetHeader(); ok {
				return f.octetFrame(n, hdr)
			}
		}
		return f.line()
	}
}

// octetHeader peeks at "LEN SP"; ok is false when that is not what follows.
func (f *Framer) octetHeader() (n, hdr int, ok bool) {
	for i := 1; i <= 11; i++ {
		b, err := f.r.Peek(i + 1)
		if len(b) < i+1 || err != nil {
			return 0, 0, false
		}
		c := b[i]
		if c == ' ' {
			return n*10 + int(b[i-1]-'0'), i + 1, true
		}
		if !isDigit(c) || i == 11 {
			return 0, 0, false
		}
		n = n*10 + int(b[i-1]-'0')
	}
	return 0, 0, false
}

func (f *Framer) octetFrame(n, hdr int) ([]byte, bool, error) {
	if _, err := f.r.Discard(hdr); err != nil {
		return nil, false, err
	}
	if n > f.max {
		// Skip it; a stream that ends inside it ends at the next call.
		_, _ = f.r.Discard(n)
		return nil, false, fmt.Errorf("%w: octet count %d above maximum %d", ErrRejected, n, f.max)
	}
	b, err := f.r.Peek(n)
	if err != nil {
		return nil, false, fmt.Errorf("read octet-counted frame of %d bytes: %w", n, unexpected(err))
	}
	// Peek's slice stays valid until the next read; Discard does not touch
	// the buffer contents.
	_, _ = f.r.Discard(n)
	return b, false, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (f *Framer) line() ([]byte, bool, error) {
	b, err := f.r.ReadSlice('\n')
	switch {
	case err == nil:
		b = b[:len(b)-1]
	case errors.Is(err, bufio.ErrBufferFull):
		// The buffer is max+16 bytes: cut at max, drop the rest of the line.
		f.overflow = append(f.overflow[:0], b[:f.max]...)
		f.discard = true
		return f.overflow, true, nil
	case errors.Is(err, io.EOF) && len(b) > 0:
		// The last message before the close, without a newline.
	default:
		return nil, false, err
	}
	if len(b) > f.max {
		return b[:f.max], true, nil
	}
	return b, false, nil
}

func (f *Framer) skipLine() error {
	for {
		_, err := f.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		f.discard = false
		return err
	}
}
