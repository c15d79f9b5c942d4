package logsvc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// selfSigned writes a certificate for 127.0.0.1 and returns the file
// names and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "vigil test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

func TestTLS(t *testing.T) {
	cert, key, pool := selfSigned(t, t.TempDir())
	h := start(t, t.TempDir(), func(c *Config) {
		c.TLSAddr, c.TLSCert, c.TLSKey = "127.0.0.1:0", cert, key
	})
	_, _, addr := h.svc.Addrs()
	conn, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	msg := "<13>1 2026-01-05T10:00:00Z cn05 sshd 9 - - over tls"
	fmt.Fprintf(conn, "%d %s", len(msg), msg)
	conn.Close()
	h.waitAccepted(t, 1)
	r := h.search(t, "host:cn05", 1)
	if len(r.Records) != 1 || r.Records[0].Text != "over tls" {
		t.Fatalf("tls record: %+v", r.Records)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{TCPAddr: ":0"}, "data directory"},
		{Config{DataDir: "x"}, "no listener"},
		{Config{DataDir: "x", TLSAddr: ":0"}, "tls_cert"},
	} {
		if _, err := New(c.cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want error with %q", c.cfg, err, c.want)
		}
	}
	_, err := New(Config{DataDir: t.TempDir(), TLSAddr: "127.0.0.1:0", TLSCert: "/nonexistent.pem", TLSKey: "/nonexistent.key"}, nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent.pem") {
		t.Errorf("missing certificate: %v", err)
	}
}

// TestTLSStalledHandshakeClosed checks that a client that begins a TLS
// handshake and stalls is closed after the frame timeout, not the much
// longer idle timeout.
func TestTLSStalledHandshakeClosed(t *testing.T) {
	cert, key, _ := selfSigned(t, t.TempDir())
	h := start(t, t.TempDir(), func(c *Config) {
		c.TLSAddr, c.TLSCert, c.TLSKey = "127.0.0.1:0", cert, key
		c.Limits = syslog.Limits{IdleTimeout: time.Minute, FrameTimeout: 300 * time.Millisecond}
	})
	_, _, addr := h.svc.Addrs()
	conn, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte{0x16, 0x03, 0x01}) // the start of a ClientHello
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("read data from a stalled handshake")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("stalled handshake not closed within 10 s")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v", d)
	}
}
