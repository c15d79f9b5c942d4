// Package wire is the stream protocol between samplers, aggregators and the
// server: length-prefixed, checksummed frames carrying per-node schemas once
// and then compact per-tick values encoded against the previous tick.
// docs/format/wire.md describes the bytes.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
)

// Version is the protocol version carried in every frame header. Version 2
// authenticates every frame of a keyed session (session.go).
const Version = 2

// Frame types.
const (
	frameHello     byte = 1  // handshake: flags, nonce, name [, mac]
	frameAuth      byte = 2  // client's answer to the server's challenge
	frameReady     byte = 3  // server accepted the handshake
	frameClose     byte = 4  // peer is closing: reason string
	framePing      byte = 5  // keep-alive, empty
	frameAck       byte = 6  // receiver to sender: bytes of frames processed so far (uvarint)
	frameKeyReq    byte = 7  // receiver to sender: send these streams' next values as keyframes
	frameSchema    byte = 16 // stream id, node, descriptor table changes, order
	frameValues    byte = 17 // stream id, time, encoded values
	frameGap       byte = 18 // node, from, to
	frameNodeState byte = 19 // node, up, time

	// frameKey flags a Values frame as a keyframe: value and time state
	// are reset (to their initial zero) before it is decoded.
	frameKey byte = 0x80
)

const (
	headerSize  = 6 // length u32, version u8, type u8
	trailerSize = 4 // CRC-32C
	// DefaultMaxFrame bounds a frame's payload unless Limits say otherwise.
	DefaultMaxFrame = 16 << 20
	// maxHandshakeFrame bounds a frame's payload before authentication: a
	// hello is at most 322 bytes, so an unauthenticated peer cannot make
	// the receiver buffer more.
	maxHandshakeFrame = 1024
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors a receiver reports when it drops a connection.
var (
	ErrFrameTooLarge = errors.New("frame larger than the maximum")
	ErrChecksum      = errors.New("frame checksum mismatch")
	ErrVersion       = errors.New("unsupported protocol version")
	ErrUnknownFrame  = errors.New("unknown frame type")
	ErrMalformed     = errors.New("malformed frame")
	ErrLimit         = errors.New("limit exceeded")
	// ErrFrameAuth is a frame of a keyed session whose tag does not match:
	// forged, replayed, reordered, or a frame before it went missing.
	ErrFrameAuth = errors.New("frame authentication failed")
)

// beginFrame appends a header whose length is filled in by endFrame.
func beginFrame(dst []byte, typ byte) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, Version, typ)
	return dst, start
}

// endFrame fills the length of the frame started at start and appends the
// checksum of version, type and payload.
func endFrame(dst []byte, start int) []byte {
	n := len(dst) - start - headerSize
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	sum := crc32.Checksum(dst[start+4:], castagnoli)
	return binary.BigEndian.AppendUint32(dst, sum)
}

// appendFrame appends a whole frame with the given payload.
func appendFrame(dst []byte, typ byte, payload []byte) []byte {
	dst, start := beginFrame(dst, typ)
	dst = append(dst, payload...)
	return endFrame(dst, start)
}

// FrameReader reads frames from a stream. The payload returned by Next is
// valid until the next call.
type FrameReader struct {
	r   io.Reader
	max int
	hdr [headerSize]byte
	buf []byte    // header, payload and trailer of the last frame
	mac *frameMAC // keyed session: frames end in a tag, not a CRC
}

// NewFrameReader reads frames of at most max payload bytes (<= 0: the default).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	return &FrameReader{r: r, max: max}
}

// trailer is the size of the frames' trailer: CRC or tag.
func (fr *FrameReader) trailer() int {
	if fr.mac != nil {
		return tagSize
	}
	return trailerSize
}

// Next returns the next frame's type and payload. io.EOF means the stream
// ended cleanly between frames.
func (fr *FrameReader) Next() (byte, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, fmt.Errorf("frame header: %w", err)
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:4])
	if uint64(n) > uint64(fr.max) {
		return 0, nil, fmt.Errorf("%w: %d > %d bytes", ErrFrameTooLarge, n, fr.max)
	}
	if v := fr.hdr[4]; v != Version {
		return 0, nil, fmt.Errorf("%w %d (this end speaks %d)", ErrVersion, v, Version)
	}
	// Grow the buffer as bytes arrive, so a forged length costs memory only
	// when the peer actually sends that much.
	end := headerSize + int(n)
	need := end + fr.trailer()
	buf := append(fr.buf[:0], fr.hdr[:]...)
	for len(buf) < need {
		chunk := min(need-len(buf), max(64<<10, len(buf)))
		buf = slices.Grow(buf, chunk)
		k, err := io.ReadFull(fr.r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+k]
		if err != nil {
			fr.buf = buf
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, fmt.Errorf("frame body: %w", err)
		}
	}
	fr.buf = buf
	if fr.mac != nil {
		if !fr.mac.check(buf[:end], buf[end:]) {
			return 0, nil, fmt.Errorf("%w (type %d, %d bytes)", ErrFrameAuth, fr.hdr[5], n)
		}
	} else {
		sum := crc32.Checksum(buf[4:end], castagnoli)
		if got := binary.BigEndian.Uint32(buf[end:]); got != sum {
			return 0, nil, fmt.Errorf("%w (type %d, %d bytes)", ErrChecksum, fr.hdr[5], n)
		}
	}
	return fr.hdr[5], buf[headerSize:end], nil
}

// payloadReader decodes the primitive fields of a payload; the first
// failure sticks, so callers check err once.
type payloadReader struct {
	b   []byte
	err error
}

func (p *payloadReader) fail(what string) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: %s", ErrMalformed, what)
	}
}

func (p *payloadReader) uvarint(what string) uint64 {
	if p.err != nil {
		return 0
	}
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.fail(what)
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *payloadReader) varint(what string) int64 {
	u := p.uvarint(what)
	return int64(u>>1) ^ -int64(u&1)
}

func (p *payloadReader) byte1(what string) byte {
	if p.err != nil {
		return 0
	}
	if len(p.b) == 0 {
		p.fail(what)
		return 0
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c
}

func (p *payloadReader) bytes(n int, what string) []byte {
	if p.err != nil {
		return nil
	}
	if n < 0 || n > len(p.b) {
		p.fail(what)
		return nil
	}
	s := p.b[:n]
	p.b = p.b[n:]
	return s
}

// str reads a length-prefixed string of at most maxString bytes.
func (p *payloadReader) str(what string) []byte {
	n := p.uvarint(what)
	if n > maxString {
		p.fail(what + " too long")
		return nil
	}
	return p.bytes(int(n), what)
}

// count reads an element count and checks it against the bytes left (each
// element takes at least one byte), so a forged count cannot make the
// receiver allocate.
func (p *payloadReader) count(what string, limit int) int {
	n := p.uvarint(what)
	if p.err != nil {
		return 0
	}
	if n > uint64(len(p.b)) {
		p.fail(what + " exceeds the frame")
		return 0
	}
	if n > uint64(limit) {
		p.err = fmt.Errorf("%w: %s %d > %d", ErrLimit, what, n, limit)
		return 0
	}
	return int(n)
}

// maxString bounds names, help texts, label values and node names.
const maxString = 1 << 16

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }
