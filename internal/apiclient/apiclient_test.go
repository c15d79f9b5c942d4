package apiclient

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve runs h until the test ends; handlers may wait on done, which is
// closed before the server is (Close waits for handlers).
func serve(t *testing.T, done chan struct{}, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	if done != nil {
		t.Cleanup(func() { close(done) })
	}
	return hs
}

func TestBaseURL(t *testing.T) {
	for _, tc := range []struct{ server, path, want string }{
		{"http://localhost:9090", "/api/v1/query", "http://localhost:9090/api/v1/query"},
		{"http://localhost:9090/", "/api/v1/query", "http://localhost:9090/api/v1/query"},
		{"localhost:9090", "/api/v1/query", "http://localhost:9090/api/v1/query"},
		{"https://mon.example.org/vigil//", "/api/v1/logs/search", "https://mon.example.org/vigil/api/v1/logs/search"},
		{"http://[::1]:9090", "/x", "http://[::1]:9090/x"},
	} {
		if got := newClient(t, Options{Server: tc.server}).URL(tc.path, nil); got != tc.want {
			t.Errorf("%q + %q = %q, want %q", tc.server, tc.path, got, tc.want)
		}
	}
	for _, bad := range []string{"", "ftp://h:21", "http://", "http://h:9090/?x=1", "http://h/#f", "://x"} {
		if _, err := New(Options{Server: bad}); err == nil || !strings.Contains(err.Error(), "want http://HOST:PORT") {
			t.Errorf("server %q: err = %v, want a clear URL error", bad, err)
		}
	}
}

func TestErrorDecoding(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		post   bool
		want   Error
		text   string
	}{
		{"prometheus", 400, `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"}`, true,
			Error{Status: 400, ErrorType: "bad_data", Message: "1:5: parse error: unclosed left parenthesis"},
			"server answered 400 bad_data: 1:5: parse error: unclosed left parenthesis"},
		{"prometheus 422", 422, `{"status":"error","errorType":"execution","error":"query processing would load too many samples"}`, false,
			Error{Status: 422, ErrorType: "execution", Message: "query processing would load too many samples"},
			"server answered 422 execution: query processing would load too many samples"},
		{"log api", 400, `{"error":"sort=\"x\": want count, recent or new"}`, false,
			Error{Status: 400, Message: `sort="x": want count, recent or new`},
			`server answered 400 Bad Request: sort="x": want count, recent or new`},
		{"plain text 401", 401, "Unauthorized\n", true,
			Error{Status: 401, Message: "Unauthorized"}, "server answered 401 Unauthorized"},
		{"html 502", 502, "<html>\n<body>Bad   gateway</body></html>", false,
			Error{Status: 502, Message: "<html> <body>Bad gateway</body></html>"},
			"server answered 502 Bad Gateway: <html> <body>Bad gateway</body></html>"},
		{"long body", 500, strings.Repeat("é", 300), true,
			Error{Status: 500, Message: strings.Repeat("é", 100) + "…"}, "server answered 500 Internal Server Error: éé"},
		{"empty body", 503, "", false, Error{Status: 503}, "server answered 503 Service Unavailable"},
		{"success status with error code", 500, `{"status":"success","data":1}`, true,
			Error{Status: 500, Message: `{"status":"success","data":1}`}, "server answered 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := serve(t, nil, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			c := newClient(t, Options{Server: hs.URL})
			var err error
			if tc.post {
				_, err = c.Post(context.Background(), "/api/v1/query", nil)
			} else {
				err = c.GetJSON(context.Background(), "/api/v1/logs/patterns", nil, &struct{}{})
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if *e != tc.want {
				t.Errorf("error %+v, want %+v", *e, tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.text) {
				t.Errorf("message %q, want it to start %q", err.Error(), tc.text)
			}
		})
	}
}

func TestPostEnvelope(t *testing.T) {
	hs := serve(t, nil, func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.URL.Path != "/p/api/v1/query" {
			http.Error(w, "bad request", 400)
			return
		}
		switch r.Form.Get("query") {
		case "ok":
			io.WriteString(w, `{"status":"success","data":{"resultType":"scalar","result":[1,"2"]},"warnings":["w"]}`)
		case "html":
			io.WriteString(w, "<html>hi</html>")
		case "bad":
			w.WriteHeader(400)
			io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"no"}`)
		}
	})
	c := newClient(t, Options{Server: hs.URL + "/p/"})
	r, err := c.Post(context.Background(), "/api/v1/query", map[string][]string{"query": {"ok"}})
	if err != nil || string(r.Data) != `{"resultType":"scalar","result":[1,"2"]}` || len(r.Warnings) != 1 || !bytes.HasPrefix(r.Raw, []byte(`{"status":"success"`)) {
		t.Fatalf("answer %+v, %v", r, err)
	}
	var d struct{ ResultType string }
	if err := c.Query(context.Background(), "/api/v1/query", map[string][]string{"query": {"ok"}}, &d); err != nil || d.ResultType != "scalar" {
		t.Errorf("Query: %+v, %v", d, err)
	}
	// An error answer still returns its envelope (vigil query --json prints it).
	r, err = c.Post(context.Background(), "/api/v1/query", map[string][]string{"query": {"bad"}})
	if r == nil || r.Status != "error" || err == nil {
		t.Errorf("error answer: %+v, %v", r, err)
	}
	_, err = c.Post(context.Background(), "/api/v1/query", map[string][]string{"query": {"html"}})
	if err == nil || !strings.Contains(err.Error(), "is not API JSON") {
		t.Errorf("HTML answer: err = %v, want not API JSON", err)
	}
}

// TestMaxResponse: a server sending more than the cap (here without end)
// gets a clear error after the cap, not an out-of-memory client.
func TestMaxResponse(t *testing.T) {
	const limit = 1 << 20
	done := make(chan struct{})
	hs := serve(t, done, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"success","data":"`)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 1 << 14 { // 1 GiB at most
			select {
			case <-done:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	c := newClient(t, Options{Server: hs.URL, MaxResponse: limit})
	for name, call := range map[string]func() error{
		"Post":    func() error { _, err := c.Post(context.Background(), "/api/v1/query", nil); return err },
		"GetJSON": func() error { return c.GetJSON(context.Background(), "/api/v1/logs/search", nil, &struct{}{}) },
	} {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "larger than the limit of 1 MiB") {
			t.Errorf("%s: err = %v, want the size limit named", name, err)
		}
	}
	// A declared length over the cap fails before reading.
	hs3 := serve(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(limit+1))
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the body never comes
	})
	if _, err := newClient(t, Options{Server: hs3.URL, MaxResponse: limit}).Post(context.Background(), "/q", nil); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Errorf("Content-Length over the cap: err = %v", err)
	}
	// Just below the cap is fine.
	body := `{"status":"success","data":"` + strings.Repeat("y", limit-40) + `"}`
	hs2 := serve(t, nil, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
	if _, err := newClient(t, Options{Server: hs2.URL, MaxResponse: int64(len(body))}).Post(context.Background(), "/q", nil); err != nil {
		t.Errorf("answer of exactly the cap: %v", err)
	}
}

func TestTimeout(t *testing.T) {
	done := make(chan struct{})
	arrived := make(chan struct{}, 10)
	hs := serve(t, done, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		io.WriteString(w, `{"status":"success",`) // then nothing: a stuck server
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	c := newClient(t, Options{Server: hs.URL, Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := c.Post(context.Background(), "/api/v1/query", nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no complete answer within 100ms") {
		t.Errorf("err = %v, want the timeout named", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("gave up after %s", el)
	}

	// The caller's deadline and cancellation end a request too.
	c = newClient(t, Options{Server: hs.URL, Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.GetJSON(ctx, "/x", nil, &struct{}{}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "before the deadline") {
		t.Errorf("caller's deadline: err = %v", err)
	}
	for len(arrived) > 0 {
		<-arrived
	}
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		<-arrived // cancel a request in progress
		cancel()
	}()
	if err := c.GetJSON(ctx, "/x", nil, &struct{}{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
}

// TestStreamIdle: a stream has no overall timeout, only a bound on the
// silence between data.
func TestStreamIdle(t *testing.T) {
	const idle = 200 * time.Millisecond
	done := make(chan struct{})
	hs := serve(t, done, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refused" {
			w.WriteHeader(403)
			io.WriteString(w, `{"error":"not you"}`)
			return
		}
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		// Data every idle/4 for 3 idle periods, then silence.
		for i := range 12 {
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(idle / 4):
			case <-done:
				return
			}
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})
	c := newClient(t, Options{Server: hs.URL, Timeout: idle})
	body, err := c.Stream(context.Background(), "/tail", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	start := time.Now()
	b, err := io.ReadAll(body)
	if el := time.Since(start); el < 2*idle {
		t.Errorf("stream ended after %s, before its data did", el)
	}
	if n := strings.Count(string(b), "\n"); n != 12 {
		t.Errorf("read %d lines, want 12", n)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "nothing received for 200ms") {
		t.Errorf("err = %v, want the idle bound named", err)
	}

	_, err = c.Stream(context.Background(), "/refused", nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != 403 || e.Message != "not you" {
		t.Errorf("refused stream: err = %v", err)
	}
}

// tlsAuthServer is an HTTPS server that wants basic auth vigil:s3cret; it
// returns the server and the CA file that verifies it.
func tlsAuthServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	hs := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "vigil" || p != "s3cret" {
			if r.Header.Get("Authorization") != "Bearer t0ken" {
				w.Header().Set("WWW-Authenticate", "Basic")
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
		}
		io.WriteString(w, `{"status":"success","data":"hello"}`)
	}))
	t.Cleanup(hs.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hs.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return hs, ca
}

func TestHTTPConfig(t *testing.T) {
	hs, ca := tlsAuthServer(t)
	dir := filepath.Dir(ca)
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no config", "", "certificate"},
		{"CA only", "tls_config:\n  ca_file: ca.pem\n", "401"},
		{"basic auth, password_file relative to the file", "basic_auth:\n  username: vigil\n  password_file: pw\ntls_config:\n  ca_file: ca.pem\n", ""},
		{"basic auth, password", "basic_auth:\n  username: vigil\n  password: s3cret\ntls_config:\n  ca_file: " + ca + "\n", ""},
		{"wrong password", "basic_auth:\n  username: vigil\n  password: nope\ntls_config:\n  ca_file: ca.pem\n", "401"},
		{"bearer", "authorization:\n  credentials: t0ken\ntls_config:\n  ca_file: ca.pem\n", ""},
		{"insecure_skip_verify", "basic_auth:\n  username: vigil\n  password: s3cret\ntls_config:\n  insecure_skip_verify: true\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.yaml != "" {
				file = filepath.Join(dir, "http.yml")
				if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			hc, err := NewHTTPClient(file)
			if err != nil {
				t.Fatal(err)
			}
			var s string
			err = newClient(t, Options{Server: hs.URL, HTTP: hc}).Query(context.Background(), "/api/v1/query", nil, &s)
			if tc.want == "" {
				if err != nil || s != "hello" {
					t.Errorf("got %q, %v", s, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	for name, yaml := range map[string]string{
		"unknown key":       "basic_auht:\n  username: x\n",
		"missing file":      "basic_auth:\n  username: vigil\n  password_file: /nonexistent/pw\n",
		"password and file": "basic_auth:\n  username: vigil\n  password: a\n  password_file: pw\n",
	} {
		file := filepath.Join(dir, "bad.yml")
		if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		hc, err := NewHTTPClient(file)
		if err == nil {
			// Some problems (an unreadable password file) show only on use.
			_, err = newClient(t, Options{Server: hs.URL, HTTP: hc}).Post(context.Background(), "/", nil)
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := NewHTTPClient(filepath.Join(dir, "absent.yml")); err == nil || !strings.Contains(err.Error(), "absent.yml") {
		t.Errorf("absent file: err = %v", err)
	}
}

// testCA is a certificate authority for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", der)
	return &testCA{cert, key}
}

// issue writes name.pem and name.key, a certificate for cn (and 127.0.0.1)
// with the given use.
func (ca *testCA) issue(t *testing.T, dir, name, cn string, use x509.ExtKeyUsage) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{use},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(dir, name+".key"), "PRIVATE KEY", keyDER)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClientCertificate: tls_config cert_file and key_file present a
// client certificate to a server that requires one.
func TestClientCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	ca.issue(t, dir, "client", "vigil-cli", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"status":"success","data":%q}`, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	hs.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	hs.StartTLS()
	t.Cleanup(hs.Close)
	writePEM(t, filepath.Join(dir, "server-ca.pem"), "CERTIFICATE", hs.Certificate().Raw)
	for _, tc := range []struct{ yaml, want string }{
		{"tls_config:\n  ca_file: server-ca.pem\n", "certificate required"},
		{"tls_config:\n  ca_file: server-ca.pem\n  cert_file: client.pem\n  key_file: client.key\n", ""},
	} {
		file := filepath.Join(dir, "http.yml")
		if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		hc, err := NewHTTPClient(file)
		if err != nil {
			t.Fatal(err)
		}
		var cn string
		err = newClient(t, Options{Server: hs.URL, HTTP: hc}).Query(context.Background(), "/api/v1/query", nil, &cn)
		if tc.want == "" && (err != nil || cn != "vigil-cli") {
			t.Errorf("with a client certificate: %q, %v", cn, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("without a client certificate: err = %v, want %q", err, tc.want)
		}
	}
}

// TestExporterToolkitServer: the client works with a listener configured
// by a Prometheus web config (exporter-toolkit, as vigil server's
// --web-config): TLS and a bcrypt basic-auth user.
func TestExporterToolkitServer(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	ca.issue(t, dir, "server", "127.0.0.1", x509.ExtKeyUsageServerAuth)
	webConfig := filepath.Join(dir, "web.yml")
	// The hash is bcrypt of "s3cret".
	if err := os.WriteFile(webConfig, []byte("tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"+
		"basic_auth_users:\n  vigil: $2a$04$y26MAnd8JXLck6wNtYPtjOUwxl3R7KziJ6.NTVYyefhL0wa4iTdKS\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"success","data":"hello"}`)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	served := make(chan error, 1)
	go func() {
		served <- web.Serve(l, srv, &web.FlagConfig{WebConfigFile: &webConfig}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { srv.Close(); <-served })
	base := "https://" + l.Addr().String()
	for _, tc := range []struct{ yaml, want string }{
		{"tls_config:\n  ca_file: ca.pem\n", "server answered 401 Unauthorized"},
		{"basic_auth:\n  username: vigil\n  password: s3cret\ntls_config:\n  ca_file: ca.pem\n", ""},
	} {
		file := filepath.Join(dir, "http.yml")
		if err := os.WriteFile(file, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		hc, err := NewHTTPClient(file)
		if err != nil {
			t.Fatal(err)
		}
		var s string
		err = newClient(t, Options{Server: base, HTTP: hc}).Query(context.Background(), "/api/v1/query", nil, &s)
		if tc.want == "" && (err != nil || s != "hello") {
			t.Errorf("with credentials: %q, %v", s, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("without credentials: err = %v, want %q", err, tc.want)
		}
	}
}

func TestReadAtMost(t *testing.T) {
	for _, n := range []int{0, 1, 16<<10 - 1, 16 << 10, 16<<10 + 1, 100 << 10, 3 << 20} {
		in := make([]byte, n)
		for i := range in {
			in[i] = byte(i * 7)
		}
		got, err := readAtMost(io.LimitReader(bytes.NewReader(in), int64(n)), int64(n))
		if err != nil || !bytes.Equal(got, in) {
			t.Errorf("%d bytes: got %d bytes, %v", n, len(got), err)
		}
		if n > 0 {
			if _, err := readAtMost(bytes.NewReader(in), int64(n-1)); !errors.Is(err, errTooLarge) {
				t.Errorf("%d bytes, limit %d: err = %v", n, n-1, err)
			}
		}
	}
}
