package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
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
// reflecting a mac back; fresh nonces on both sides stop replay.

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

func appendHello(dst []byte, h hello) []byte {
	dst, start := beginFrame(dst, frameHello)
	var flags byte
	if h.keyed {
		flags |= helloKeyed
	}
	dst = append(dst, flags)
	dst = append(dst, h.nonce...)
	dst = appendString(dst, h.name)
	dst = append(dst, h.mac...)
	return endFrame(dst, start)
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

// clientHandshake runs the client side on an established connection and
// returns the server's name.
func clientHandshake(rw io.ReadWriter, fr *FrameReader, key []byte, name string) (string, error) {
	nc := newNonce()
	if _, err := rw.Write(appendHello(nil, hello{keyed: key != nil, nonce: nc, name: name})); err != nil {
		return "", fmt.Errorf("send hello: %w", err)
	}
	payload, err := expect(fr, frameHello, "server hello")
	if err != nil {
		return "", err
	}
	sh, err := parseHello(payload, true)
	if err != nil {
		return "", fmt.Errorf("server hello: %w", err)
	}
	if key != nil {
		if !sh.keyed {
			_, _ = rw.Write(appendClose(nil, "client requires a key"))
			return sh.name, fmt.Errorf("%w: server %q has no key, so it cannot prove itself", ErrAuth, sh.name)
		}
		if !hmac.Equal(sh.mac, mac(key, "vigil/1 server", nc, sh.nonce)) {
			_, _ = rw.Write(appendClose(nil, "server failed authentication"))
			return sh.name, fmt.Errorf("%w: server %q does not hold our key", ErrAuth, sh.name)
		}
		var buf []byte
		buf, start := beginFrame(buf, frameAuth)
		buf = append(buf, mac(key, "vigil/1 client", sh.nonce, nc)...)
		if _, err := rw.Write(endFrame(buf, start)); err != nil {
			return sh.name, fmt.Errorf("send auth: %w", err)
		}
	}
	if _, err := expect(fr, frameReady, "ready"); err != nil {
		if sh.keyed && key == nil {
			return sh.name, fmt.Errorf("%w: server requires a key: %v", ErrAuth, err)
		}
		return sh.name, err
	}
	return sh.name, nil
}

// serverHandshake runs the server side and returns the client's name. On an
// authentication failure it tells the client why before returning ErrAuth.
func serverHandshake(rw io.ReadWriter, fr *FrameReader, key []byte, name string) (string, error) {
	payload, err := expect(fr, frameHello, "client hello")
	if err != nil {
		return "", err
	}
	ch, err := parseHello(payload, false)
	if err != nil {
		return "", fmt.Errorf("client hello: %w", err)
	}
	ns := newNonce()
	sh := hello{keyed: key != nil, nonce: ns, name: name}
	if key != nil {
		sh.mac = mac(key, "vigil/1 server", ch.nonce, ns)
	}
	if _, err := rw.Write(appendHello(nil, sh)); err != nil {
		return ch.name, fmt.Errorf("send hello: %w", err)
	}
	if key != nil {
		if !ch.keyed {
			_, _ = rw.Write(appendClose(nil, "a key is required"))
			return ch.name, fmt.Errorf("%w: client %q has no key", ErrAuth, ch.name)
		}
		payload, err := expect(fr, frameAuth, "auth")
		if err != nil {
			return ch.name, fmt.Errorf("%w: client %q: %v", ErrAuth, ch.name, err)
		}
		if !hmac.Equal(payload, mac(key, "vigil/1 client", ns, ch.nonce)) {
			_, _ = rw.Write(appendClose(nil, "authentication failed"))
			return ch.name, fmt.Errorf("%w: client %q does not hold our key", ErrAuth, ch.name)
		}
	}
	if _, err := rw.Write(appendFrame(nil, frameReady, nil)); err != nil {
		return ch.name, fmt.Errorf("send ready: %w", err)
	}
	return ch.name, nil
}
