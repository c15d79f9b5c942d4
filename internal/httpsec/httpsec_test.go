package httpsec

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	vtestutil "github.com/vigil-hpc/vigil/internal/testutil"
)

// serve runs Serve on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler, o Options) string {
	t.Helper()
	return vtestutil.Serve(t, func(ctx context.Context, ln net.Listener) error { return Serve(ctx, ln, h, o) })
}

func ok(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }

func TestInstrument(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/query", ok)
	mux.HandleFunc("GET /teapot", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	addr := serve(t, m.Instrument(mux), Options{ConnState: m.ConnState})
	for _, p := range []string{"/api/v1/query?query=1", "/api/v1/query", "/teapot", "/nowhere"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		// A drained body keeps the connection for the next request.
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for _, c := range []struct {
		handler, code string
		want          float64
	}{{"/api/v1/query", "200", 2}, {"/teapot", "418", 1}, {"none", "404", 1}} {
		if got := testutil.ToFloat64(m.requests.WithLabelValues(c.handler, c.code)); got != c.want {
			t.Errorf("requests{handler=%q,code=%q} = %v, want %v", c.handler, c.code, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.conns); got < 1 {
		t.Errorf("open connections = %v while the client keeps one alive", got)
	}
}

// Requests refused by the web configuration's basic auth never reach the
// instrumented mux; Outer counts them (TLS and plain HTTP).
func TestRefusedCounted(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /api/v1/query", ok)
		file, client := vtestutil.WebConfig(t, "admin", "s3cret", withTLS)
		addr := serve(t, m.Instrument(mux), Options{WebConfigFile: file, ConnState: m.ConnState, Outer: m.Outer})
		scheme := "http://"
		if withTLS {
			scheme = "https://"
		}
		get := func(user, pass string) int {
			req, err := http.NewRequest("GET", scheme+addr+"/api/v1/query", nil)
			if err != nil {
				t.Fatal(err)
			}
			if user != "" {
				req.SetBasicAuth(user, pass)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, c := range []struct {
			user, pass string
			want       int
		}{{"", "", 401}, {"admin", "wrong", 401}, {"admin", "s3cret", 200}, {"nobody", "s3cret", 401}} {
			if got := get(c.user, c.pass); got != c.want {
				t.Fatalf("tls=%v user %q: status %d, want %d", withTLS, c.user, got, c.want)
			}
		}
		if got := testutil.ToFloat64(m.refused.WithLabelValues("401")); got != 3 {
			t.Errorf("tls=%v: vigil_http_refused_total{code=401} = %v, want 3", withTLS, got)
		}
		if got := testutil.ToFloat64(m.requests.WithLabelValues("/api/v1/query", "200")); got != 1 {
			t.Errorf("tls=%v: requests that reached the handler = %v, want 1", withTLS, got)
		}
	}
}
