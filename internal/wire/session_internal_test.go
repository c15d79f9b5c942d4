package wire

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts the bytes the server reads.
type countingConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// A peer that has not authenticated and announces a 16 MiB frame (then
// sends that much) gets the connection closed after the server read no
// more than its small handshake buffer.
func TestHandshakeReadsLittle(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("0123456789abcdef-test-key")} {
		srvEnd, peer := net.Pipe()
		cc := &countingConn{Conn: srvEnd}
		o := &ServerOptions{Key: key, Stats: &ServerStats{}, HandshakeTimeout: 5 * time.Second, Limits: Limits{}.withDefaults()}
		go func() {
			hdr := []byte{0x00, 0xff, 0xff, 0xff, Version, frameHello}
			if _, err := peer.Write(hdr); err != nil {
				return
			}
			junk := bytes.Repeat([]byte{0xa5}, 64<<10)
			for range 256 { // 16 MiB, unless the server hangs up first
				if _, err := peer.Write(junk); err != nil {
					return
				}
			}
		}()
		nt := &notices{last: map[noticeKey]*notice{}}
		authed := serveConn(context.Background(), cc, o, slog.New(slog.DiscardHandler), nt, NopHandler{}, func() {})
		srvEnd.Close()
		peer.Close()
		if authed {
			t.Fatal("peer authenticated")
		}
		if n := cc.n.Load(); n > 2*maxHandshakeFrame {
			t.Errorf("key %v: server read %d bytes of an unauthenticated peer, want at most %d", key != nil, n, 2*maxHandshakeFrame)
		}
		if o.Stats.HandshakeTooLarge.Load() != 1 || o.Stats.ProtocolErrors.Load() != 1 {
			t.Errorf("too large %d, protocol errors %d; want 1, 1", o.Stats.HandshakeTooLarge.Load(), o.Stats.ProtocolErrors.Load())
		}
	}
}

// sealedStream is validStream as a keyed session's sender writes it.
func sealedStream(t *testing.T, key []byte) (plain, sealed []byte) {
	plain = validStream(t)
	s := newSession(key, []byte("client hello"), []byte("server hello"), true)
	return plain, s.send.seal(nil, plain)
}

func readAll(fr *FrameReader) (frames int, err error) {
	for {
		if _, _, err := fr.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				return frames, nil
			}
			return frames, err
		}
		frames++
	}
}

// Tags replace checksums; any change to the sealed bytes, a replayed or
// reordered frame, or a session of other hellos fails.
func TestSealedFrames(t *testing.T) {
	key := []byte("0123456789abcdef-test-key")
	plain, sealed := sealedStream(t, key)
	nplain, err := readAll(NewFrameReader(bytes.NewReader(plain), 0))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(plain) + nplain*(tagSize-trailerSize); len(sealed) != want {
		t.Fatalf("sealed %d bytes, want %d", len(sealed), want)
	}
	open := func(data []byte, cHello string) (int, error) {
		fr := NewFrameReader(bytes.NewReader(data), 0)
		fr.mac = newSession(key, []byte(cHello), []byte("server hello"), false).recv
		return readAll(fr)
	}
	if n, err := open(sealed, "client hello"); err != nil || n != nplain {
		t.Fatalf("opened %d of %d frames: %v", n, nplain, err)
	}
	// Frame boundaries, to replay and reorder whole frames.
	var bounds []int
	for off := 0; off < len(sealed); off += headerSize + int(binary.BigEndian.Uint32(sealed[off:])) + tagSize {
		bounds = append(bounds, off)
	}
	bounds = append(bounds, len(sealed))
	frame := func(i int) []byte { return sealed[bounds[i]:bounds[i+1]] }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	flip := bytes.Clone(sealed)
	flip[bounds[3]+headerSize] ^= 1
	cases := []struct {
		name  string
		data  []byte
		hello string
	}{
		{"bit flipped", flip, "client hello"},
		{"replayed frame", cat(frame(0), frame(1), frame(1), sealed[bounds[2]:]), "client hello"},
		{"reordered frames", cat(frame(0), frame(2), frame(1), sealed[bounds[3]:]), "client hello"},
		{"frame dropped", cat(frame(0), sealed[bounds[2]:]), "client hello"},
		{"checksummed frame injected", cat(frame(0), AppendNodeState(nil, "cn1", false, time.Unix(1, 0)), sealed[bounds[1]:]), "client hello"},
		{"other session", sealed, "another client hello"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := open(c.data, c.hello); !errors.Is(err, ErrFrameAuth) {
				t.Errorf("err = %v, want %v", err, ErrFrameAuth)
			}
		})
	}
}

// Sealing and checking a frame allocates nothing.
func TestSealZeroAlloc(t *testing.T) {
	key := []byte("0123456789abcdef-test-key")
	plain := validStream(t)
	s := newSession(key, nil, nil, true)
	r := newSession(key, nil, nil, false)
	dst := make([]byte, 0, 2*len(plain))
	rd := bytes.NewReader(nil)
	fr := NewFrameReader(rd, 0)
	fr.mac = r.recv
	allocs := testing.AllocsPerRun(50, func() {
		dst = s.send.seal(dst[:0], plain)
		rd.Reset(dst)
		if _, err := readAll(fr); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per sealed and checked stream", allocs)
	}
}

// BenchmarkFrameMAC is the cost of a tag per frame, sealing (sender) and
// checking (receiver), against HMAC-SHA256 truncated to 16 bytes, the
// obvious alternative. Frame sizes: a small node-level frame, a 16-core
// node's tick (321 values), a large schema.
func BenchmarkFrameMAC(b *testing.B) {
	key := []byte("0123456789abcdef-test-key")
	for _, size := range []int{64, 300, 4096} {
		frame := appendFrame(nil, frameValues, make([]byte, size-headerSize-trailerSize))
		b.Run(fmt.Sprintf("gmac-seal/%dB", size), func(b *testing.B) {
			m := newSession(key, nil, nil, true).send
			dst := make([]byte, 0, 2*len(frame))
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				dst = m.seal(dst[:0], frame)
			}
		})
		b.Run(fmt.Sprintf("gmac-check/%dB", size), func(b *testing.B) {
			tagged := newSession(key, nil, nil, true).send.seal(nil, frame)
			n := len(tagged) - tagSize
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			r := newSession(key, nil, nil, false).recv
			for b.Loop() {
				r.seq = 0
				if !r.check(tagged[:n], tagged[n:]) {
					b.Fatal("tag mismatch")
				}
			}
		})
		b.Run(fmt.Sprintf("hmac-sha256-128/%dB", size), func(b *testing.B) {
			h := hmac.New(sha256.New, key)
			var seq [8]byte
			dst := make([]byte, 0, 2*len(frame))
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for i := uint64(0); b.Loop(); i++ {
				binary.BigEndian.PutUint64(seq[:], i)
				h.Reset()
				h.Write(seq[:])
				h.Write(frame[:len(frame)-trailerSize])
				dst = append(dst[:0], frame[:len(frame)-trailerSize]...)
				dst = h.Sum(dst)[:len(dst)+tagSize]
			}
		})
	}
}
