package cli

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/events"
	"github.com/vigil-hpc/vigil/internal/logs/logsvc"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/query"
	"github.com/vigil-hpc/vigil/internal/store"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// authAPI serves the query and log APIs over a store with node_load1 of
// cn01 (0, 1, 2 at t0, t0+1s, t0+2s) and one stored syslog message, behind
// basic auth vigil:s3cret.
func authAPI(t *testing.T) (http.Handler, time.Time) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	load := metric.NewDesc("node_load1", "", metric.Gauge)
	for i := range 3 {
		if err := st.AppendTick("cn01", t0.Add(time.Duration(i)*time.Second), []*metric.Desc{load}, []float64{float64(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	mux := http.NewServeMux()
	query.New(st, query.Options{}).Register(mux)

	svc, err := logsvc.New(logsvc.Config{TCPAddr: "127.0.0.1:0", DataDir: t.TempDir(), Location: time.UTC}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	mux.Handle(logsvc.Prefix+"/", svc.Handler())
	_, tcp, _ := svc.Addrs()
	c, err := net.Dial("tcp", tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "<12>Jan  5 10:00:00 cn01 sshd[7]: authentication failure for root\n")
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); svc.Stats().Accepted < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("message not stored: %+v", svc.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	evs, err := events.Open(events.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { evs.Close() })
	evs.Emit(events.Event{Time: t0, Kind: events.KindNodeDown, Node: "cn01", Summary: "node cn01 down: silent for 3s"})
	evs.Sync()
	mux.Handle(events.PathQuery, evs.QueryHandler())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "vigil" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="vigil"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}), t0
}

// clientCommands are the commands that talk to the server's API, each with
// a check of its output against authAPI.
func clientCommands(srv string, t0 time.Time) []struct {
	name string
	args []string
	want string
} {
	end := strconv.FormatInt(t0.Unix()+2, 10)
	return []struct {
		name string
		args []string
		want string
	}{
		{"query", []string{"query", "node_load1", "--server", srv, "--time", end}, "node_load1{node=\"cn01\"}  2\n"},
		{"export", []string{"export", "--server", srv, "--match", "node_load1", "--from", strconv.FormatInt(t0.Unix(), 10), "--to", end, "--out", "-"},
			"2026-11-22T12:00:02.000Z,cn01,2\n"},
		{"tree status", []string{"tree", "status", "--server", srv}, "server " + srv + ": "},
		{"logs search", []string{"logs", "search", "--server", srv, "failure"}, " cn01 sshd[7] warning: authentication failure for root\n"},
		{"logs tail", []string{"logs", "tail", "--server", srv}, " cn01 sshd[7] warning: authentication failure for root\n"},
		{"logs patterns", []string{"logs", "patterns", "--server", srv}, "sshd: authentication failure for root"},
		{"events", []string{"events", "--server", srv}, "node_down  cn01  -    node cn01 down: silent for 3s\n"},
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestClientAuth runs every API client command against a server that
// wants basic auth, over HTTP and over HTTPS with its own CA: refused
// without credentials (with a hint), served with --http-config.
func TestClientAuth(t *testing.T) {
	h, t0 := authAPI(t)
	plain := httptest.NewServer(h)
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewUnstartedServer(h)
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ca.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})))
	writeFile(t, filepath.Join(dir, "password"), "s3cret\n")
	auth := writeFile(t, filepath.Join(dir, "auth.yml"), "basic_auth:\n  username: vigil\n  password_file: password\n")
	authTLS := writeFile(t, filepath.Join(dir, "auth-tls.yml"), "basic_auth:\n  username: vigil\n  password_file: password\ntls_config:\n  ca_file: ca.pem\n")
	t.Setenv(EnvHTTPConfig, "")

	for _, srv := range []struct {
		name, url, config, refusal string
	}{
		{"http", plain.URL, auth, "server answered 401 Unauthorized (give credentials with --http-config FILE or $VIGIL_HTTP_CONFIG)"},
		{"https", tlsSrv.URL, authTLS, "certificate signed by unknown authority (trust the server's CA with tls_config: ca_file in --http-config FILE or $VIGIL_HTTP_CONFIG)"},
	} {
		for _, tc := range clientCommands(srv.url, t0) {
			t.Run(srv.name+"/"+tc.name, func(t *testing.T) {
				var out, errb bytes.Buffer
				code := Main(context.Background(), tc.args, &out, &errb)
				if code != 1 || !strings.Contains(errb.String(), srv.refusal) {
					t.Errorf("without credentials: exit %d, stderr %q, want exit 1 and %q", code, errb.String(), srv.refusal)
				}
				out.Reset()
				errb.Reset()
				code = Main(context.Background(), append(tc.args, "--http-config", srv.config), &out, &errb)
				if code != 0 || !strings.Contains(out.String(), tc.want) {
					t.Errorf("with --http-config: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out.String(), errb.String(), tc.want)
				}
			})
		}
	}

	// The environment variable is the default; an empty flag overrides it.
	t.Setenv(EnvHTTPConfig, authTLS)
	args := clientCommands(tlsSrv.URL, t0)[0].args
	var out, errb bytes.Buffer
	if code := Main(context.Background(), args, &out, &errb); code != 0 {
		t.Errorf("with $%s: exit %d, stderr %q", EnvHTTPConfig, code, errb.String())
	}
	errb.Reset()
	if code := Main(context.Background(), append(args, "--http-config="), &out, &errb); code != 1 || !strings.Contains(errb.String(), "certificate") {
		t.Errorf("--http-config= with $%s set: exit %d, stderr %q, want the variable ignored", EnvHTTPConfig, code, errb.String())
	}
	// A bad configuration file is a usage error naming the file.
	bad := writeFile(t, filepath.Join(dir, "bad.yml"), "basic_auht: {}\n")
	errb.Reset()
	if code := Main(context.Background(), append(args, "--http-config", bad), &out, &errb); code != 2 || !strings.Contains(errb.String(), bad) {
		t.Errorf("bad --http-config: exit %d, stderr %q", code, errb.String())
	}
}

// TestClientTimeout: every API client command gives up on a server that
// does not answer, after --timeout.
func TestClientTimeout(t *testing.T) {
	done := make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(stuck.Close)
	t.Cleanup(func() { close(done) })
	for _, tc := range clientCommands(stuck.URL, time.Now()) {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			start := time.Now()
			code := Main(context.Background(), append(tc.args, "--timeout", "150ms"), &out, &errb)
			if code != 1 || !strings.Contains(errb.String(), "no complete answer") {
				t.Errorf("exit %d, stderr %q, want exit 1 and a timeout", code, errb.String())
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("gave up after %s", el)
			}
		})
	}
}

// TestLogsTailIdle: tail -f has no overall timeout (keepalives keep a
// quiet stream open past --timeout), but a stream that sends nothing for
// --timeout is dropped and resumed.
func TestLogsTailIdle(t *testing.T) {
	done := make(chan struct{})
	var mu sync.Mutex
	streams := 0
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case logsvc.Prefix + "/stats":
			io.WriteString(w, `{}`)
			return
		case logsvc.Prefix + "/tail":
		default:
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		streams++
		n := streams
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		if n == 1 {
			// Quiet for 4 × --timeout but for keepalives, then one record.
			for range 16 {
				io.WriteString(w, ": keepalive\n\n")
				w.(http.Flusher).Flush()
				select {
				case <-time.After(50 * time.Millisecond):
				case <-done:
					return
				}
			}
			fmt.Fprintf(w, "id: 1\ndata: {\"seq\":1,\"time\":\"2026-01-05T10:00:00Z\",\"host\":\"cn01\",\"app\":\"app\",\"severity\":\"info\",\"text\":\"after keepalives\"}\n\n")
			w.(http.Flusher).Flush()
		}
		// Then silence.
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(done) })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb testutil.SyncBuffer
	exited := make(chan error, 1)
	go func() {
		exited <- logsTail(ctx, []string{"-f", "--limit", "0", "--timeout", "200ms", "--server", hs.URL}, &out, &errb)
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errb.String(), "reconnecting"); {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect after a silent stream; stdout %q, stderr %q", out.String(), errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-exited; err != nil {
		t.Errorf("tail ended with %v", err)
	}
	if !strings.Contains(out.String(), "after keepalives") {
		t.Errorf("record after 800ms of keepalives not printed: stdout %q, stderr %q", out.String(), errb.String())
	}
	if e := errb.String(); !strings.Contains(e, "nothing received for 200ms") || strings.Count(e, "reconnecting") < 1 {
		t.Errorf("stderr %q, want the idle bound named", e)
	}
}

// TestClientDefaults: every API client command has the same --server
// default, and each takes a bare HOST:PORT as http://HOST:PORT.
func TestClientDefaults(t *testing.T) {
	h, t0 := authAPI(t)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "password"), "s3cret\n")
	auth := writeFile(t, filepath.Join(dir, "auth.yml"), "basic_auth:\n  username: vigil\n  password_file: password\n")
	t.Setenv(EnvHTTPConfig, "")
	bare := strings.TrimPrefix(srv.URL, "http://")
	wantDefault := `(default "` + DefaultServerURL + `")`
	for _, tc := range clientCommands(bare, t0) {
		t.Run(tc.name, func(t *testing.T) {
			// The command's own words, without --server and its value.
			var help []string
			for i := 0; i < len(tc.args); i++ {
				if tc.args[i] == "--server" {
					i++
					continue
				}
				help = append(help, tc.args[i])
			}
			var out, errb bytes.Buffer
			Main(context.Background(), append(help, "-h"), &out, &errb)
			usage := errb.String()
			i := strings.Index(usage, "-server URL")
			if i < 0 || !strings.Contains(usage[i:], wantDefault) {
				t.Errorf("help of %q: --server default is not %s:\n%s", tc.name, wantDefault, usage)
			}
			out.Reset()
			errb.Reset()
			code := Main(context.Background(), append(tc.args, "--http-config", auth), &out, &errb)
			if code != 0 || !strings.Contains(out.String(), tc.want) {
				t.Errorf("--server %s: exit %d, stdout %q, stderr %q; want exit 0 and %q", bare, code, out.String(), errb.String(), tc.want)
			}
		})
	}
}
