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
