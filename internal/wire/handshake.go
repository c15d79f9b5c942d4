package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// The handshake, both directions proven when a shared key is set:
//
//	client -> Hello{flags, nonce_c, name}
//	server -> Hello{flags, nonce_s, name, mac_s = HMAC(key, "vigil/1 server" | nonce_c | nonce_s)}
//	client -> Auth{mac_c = HMAC(key, "vigil/1 client" | nonce_s | nonce_c)}
//	server -> Ready, or Close{reason}
//
// Without a key the macs are left out. Distinct labels stop a peer from
// reflecting a mac back; fresh nonces on both sides stop replay. With a
// key, both ends then derive the session's frame keys from the two hellos
// (session.go), and from the server's Ready on every frame is tagged.

const (
	helloKeyed = 1
	nonceSize  = 32
	macSize    = sha256.Size
)

// ErrAuth means the peer failed, or refused, authentication.
var ErrAuth = errors.New("authentication failed")

// LoadKey reads a shared key file (surrounding white space ignored).
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < 16 {
		return nil, fmt.Errorf("key file %s: want at least 16 bytes, found %d", path, len(b))
	}
	return b, nil
}

func mac(key []byte, label string, a, b []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(label))
	h.Write(a)
	h.Write(b)
	return h.Sum(nil)
}

type hello struct {
	keyed bool
	nonce []byte
	name  string
	mac   []byte
}

// appendHelloPayload appends a hello's payload; its bytes go into the
// session keys, so each side keeps the exact bytes of both hellos.
func appendHelloPayload(dst []byte, h hello) []byte {
	var flags byte
	if h.keyed {
		flags |= helloKeyed
	}
	dst = append(dst, flags)
	dst = append(dst, h.nonce...)
	dst = appendString(dst, h.name)
	return append(dst, h.mac...)
}

func appendHello(dst []byte, h hello) []byte {
	return appendFrame(dst, frameHello, appendHelloPayload(nil, h))
}

func parseHello(payload []byte, withMac bool) (hello, error) {
	p := payloadReader{b: payload}
	flags := p.byte1("hello flags")
	var h hello
	h.keyed = flags&helloKeyed != 0
	// Copies: the payload is overwritten by the next frame read.
	h.nonce = bytes.Clone(p.bytes(nonceSize, "hello nonce"))
	name := p.str("hello name")
	if withMac && h.keyed {
		h.mac = bytes.Clone(p.bytes(macSize, "hello mac"))
	}
	if err := p.end("hello"); err != nil {
		return h, err
	}
	if len(name) > 255 {
		return h, fmt.Errorf("%w: hello name longer than 255 bytes", ErrMalformed)
	}
	h.name = string(name)
	return h, nil
}

func newNonce() []byte {
	n := make([]byte, nonceSize)
	_, _ = rand.Read(n) // crypto/rand.Read never fails on Linux
	return n
}

// expect reads the next frame and checks its type; a Close frame becomes
// an error carrying the peer's reason.
func expect(fr *FrameReader, typ byte, what string) ([]byte, error) {
	t, payload, err := fr.Next()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if t == frameClose {
		return nil, fmt.Errorf("peer closed: %s", closeReason(payload))
	}
	if t != typ {
		return nil, fmt.Errorf("%w: got frame type %d, want %s", ErrMalformed, t, what)
	}
	return payload, nil
}

func closeReason(payload []byte) string {
	p := payloadReader{b: payload}
	r := p.str("reason")
	if p.err != nil {
		return "(unreadable reason)"
	}
	return string(r)
}

func appendClose(dst []byte, reason string) []byte {
	dst, start := beginFrame(dst, frameClose)
	dst = appendString(dst, reason)
	return endFrame(dst, start)
}

// v1Close is a Close frame as protocol version 1 frames it, so a sender
// older than version 2 logs why it is refused rather than a reset.
func v1Close(reason string) []byte {
	b := appendClose(nil, reason)
	b[4] = 1
	binary.BigEndian.PutUint32(b[len(b)-trailerSize:], crc32.Checksum(b[4:len(b)-trailerSize], castagnoli))
	return b
}

// clientHandshake runs the client side on an established connection and
// returns the server's name and, with a key, the session whose frame keys
// the client must use from now on (fr already checks incoming frames).
func clientHandshake(rw io.ReadWriter, fr *FrameReader, key []byte, name string) (string, *session, error) {
	nc := newNonce()
	ch := appendHelloPayload(nil, hello{keyed: key != nil, nonce: nc, name: name})
	if _, err := rw.Write(appendFrame(nil, frameHello, ch)); err != nil {
		return "", nil, fmt.Errorf("send hello: %w", err)
	}
	payload, err := expect(fr, frameHello, "server hello")
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w (a receiver older than wire protocol %d closes without a reason)", err, Version)
		}
		return "", nil, err
	}
	sh, err := parseHello(payload, true)
	if err != nil {
		return "", nil, fmt.Errorf("server hello: %w", err)
	}
	var sess *session
	if key != nil {
		if !sh.keyed {
			_, _ = rw.Write(appendClose(nil, "client requires a key"))
			return sh.name, nil, fmt.Errorf("%w: server %q has no key, so it cannot prove itself", ErrAuth, sh.name)
		}
		if !hmac.Equal(sh.mac, mac(key, "vigil/1 server", nc, sh.nonce)) {
			_, _ = rw.Write(appendClose(nil, "server failed authentication"))
			return sh.name, nil, fmt.Errorf("%w: server %q does not hold our key", ErrAuth, sh.name)
		}
		sess = newSession(key, ch, payload, true)
		if _, err := rw.Write(appendFrame(nil, frameAuth, mac(key, "vigil/1 client", sh.nonce, nc))); err != nil {
			return sh.name, nil, fmt.Errorf("send auth: %w", err)
		}
		fr.mac = sess.recv // the server's Ready is its first tagged frame
	}
	if _, err := expect(fr, frameReady, "ready"); err != nil {
		if sh.keyed && key == nil {
			return sh.name, nil, fmt.Errorf("%w: server requires a key: %v", ErrAuth, err)
		}
		return sh.name, nil, err
	}
	return sh.name, sess, nil
}

// serverHandshake runs the server side and returns the client's name and,
// with a key, the session (fr already checks incoming frames with it). On
// an authentication failure it tells the client why before returning
// ErrAuth.
func serverHandshake(rw io.ReadWriter, fr *FrameReader, key []byte, name string) (string, *session, error) {
	payload, err := expect(fr, frameHello, "client hello")
	if err != nil {
		if errors.Is(err, ErrVersion) && fr.hdr[4] == 1 {
			_, _ = rw.Write(v1Close(fmt.Sprintf("this receiver speaks wire protocol %d: upgrade the sender", Version)))
		}
		return "", nil, err
	}
	ch, err := parseHello(payload, false)
	if err != nil {
		return "", nil, fmt.Errorf("client hello: %w", err)
	}
	chBytes := bytes.Clone(payload)
	ns := newNonce()
	sh := hello{keyed: key != nil, nonce: ns, name: name}
	if key != nil {
		sh.mac = mac(key, "vigil/1 server", ch.nonce, ns)
	}
	shBytes := appendHelloPayload(nil, sh)
	if _, err := rw.Write(appendFrame(nil, frameHello, shBytes)); err != nil {
		return ch.name, nil, fmt.Errorf("send hello: %w", err)
	}
	ready := appendFrame(nil, frameReady, nil)
	var sess *session
	if key != nil {
		if !ch.keyed {
			_, _ = rw.Write(appendClose(nil, "a key is required"))
			return ch.name, nil, fmt.Errorf("%w: client %q has no key", ErrAuth, ch.name)
		}
		payload, err := expect(fr, frameAuth, "auth")
		if err != nil {
			return ch.name, nil, fmt.Errorf("%w: client %q: %v", ErrAuth, ch.name, err)
		}
		if !hmac.Equal(payload, mac(key, "vigil/1 client", ns, ch.nonce)) {
			_, _ = rw.Write(appendClose(nil, "authentication failed"))
			return ch.name, nil, fmt.Errorf("%w: client %q does not hold our key", ErrAuth, ch.name)
		}
		sess = newSession(key, chBytes, shBytes, false)
		fr.mac = sess.recv
		ready = sess.send.seal(nil, ready)
	}
	if _, err := rw.Write(ready); err != nil {
		return ch.name, nil, fmt.Errorf("send ready: %w", err)
	}
	return ch.name, sess, nil
}
