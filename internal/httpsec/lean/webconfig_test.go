package lean

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

func get(t *testing.T, c *http.Client, url, user, pass string) (int, error) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestWebConfigBasicAuth(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		file, client := testutil.WebConfig(t, "scraper", "pw", withTLS)
		addr := serve(t, http.HandlerFunc(ok), Options{WebConfigFile: file})
		url := "http://" + addr + "/metrics"
		if withTLS {
			url = "https://" + addr + "/metrics"
		}
		for _, c := range []struct {
			user, pass string
			want       int
		}{{"", "", 401}, {"scraper", "wrong", 401}, {"nobody", "pw", 401}, {"scraper", "pw", 200}, {"scraper", "pw", 200}} {
			code, err := get(t, client, url, c.user, c.pass)
			if err != nil || code != c.want {
				t.Errorf("tls=%v user %q pass %q: %d %v, want %d", withTLS, c.user, c.pass, code, err, c.want)
			}
		}
		if withTLS {
			if code, err := get(t, http.DefaultClient, "http://"+addr+"/metrics", "scraper", "pw"); err == nil && code == 200 {
				t.Error("plain HTTP answered 200 by the TLS listener")
			}
		}
	}
}

// TestWebConfigClientCert: RequireAndVerifyClientCert refuses a client
// without a certificate; paths are relative to the file.
func TestWebConfigClientCert(t *testing.T) {
	base, client := testutil.WebConfig(t, "u", "p", true)
	dir := filepath.Dir(base)
	file := filepath.Join(dir, "mtls.yml")
	cfg := "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_ca_file: cert.pem\n  client_auth_type: RequireAndVerifyClientCert\n  min_version: TLS13\n"
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, http.HandlerFunc(ok), Options{WebConfigFile: file})
	if code, err := get(t, client, "https://"+addr+"/", "", ""); err == nil {
		t.Fatalf("no client certificate: %d, want a TLS error", code)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	tr := client.Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	withCert := &http.Client{Transport: tr}
	if code, err := get(t, withCert, "https://"+addr+"/", "", ""); err != nil || code != 200 {
		t.Fatalf("with a client certificate: %d %v, want 200", code, err)
	}
}

func TestWebConfigErrors(t *testing.T) {
	base, _ := testutil.WebConfig(t, "u", "p", true)
	dir := filepath.Dir(base)
	for _, c := range []struct{ yaml, want string }{
		{"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n", "sampler supports"},
		{"rate_limit:\n  burst: 1\n", "sampler supports"},
		{"basic_auth_users:\n  u: plaintext\n", "not a bcrypt hash"},
		{"tls_server_config:\n  cert_file: cert.pem\n", "both cert_file and key_file"},
		{"tls_server_config:\n  cert_file: cert.pem\n  key_file: missing.pem\n", "missing.pem"},
		{"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"},
		{"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  client_auth_type: Sometimes\n", "client_auth_type"},
		{"tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: SSL3\n", "TLS version"},
		{"tls_server_config:\n  client_ca_file: cert.pem\n", "need cert_file"},
	} {
		file := filepath.Join(dir, "bad.yml")
		if err := os.WriteFile(file, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadWebConfig(file)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%q: %v, want an error naming the file and %q", c.yaml, err, c.want)
		}
	}
}
