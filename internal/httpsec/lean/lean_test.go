package lean

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// serve runs Serve on a loopback port until the test ends.
func serve(t *testing.T, h http.Handler, o Options) string {
	t.Helper()
	return testutil.Serve(t, func(ctx context.Context, ln net.Listener) error { return Serve(ctx, ln, h, o) })
}

func ok(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9090": true, "[::1]:9090": true, "localhost:9090": true, "127.0.0.2:1": true,
		":9090": false, "0.0.0.0:9090": false, "[::]:9090": false, "10.0.0.1:9090": false, "host:9090": false, "bad": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestMaxConnections: beyond the cap a client waits until a connection
// closes instead of costing the server a goroutine and buffers.
func TestMaxConnections(t *testing.T) {
	addr := serve(t, http.HandlerFunc(ok), Options{MaxConnections: 1})
	hog, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// A finished request keeps the connection (keep-alive), so the cap is
	// reached with certainty.
	fmt.Fprintf(hog, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(hog), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first connection: %v %v", resp, err)
	}
	client := &http.Client{Timeout: 300 * time.Millisecond}
	if resp, err := client.Get("http://" + addr + "/"); err == nil {
		resp.Body.Close()
		t.Fatal("second connection served while the cap of 1 was taken")
	}
	hog.Close()
	client.Timeout = 10 * time.Second
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("after the first connection closed: %v", err)
	}
	resp.Body.Close()
}

func TestMaxHeaderBytes(t *testing.T) {
	addr := serve(t, http.HandlerFunc(ok), Options{})
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 2*DefaultMaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("request with %d header bytes = %d, want 431", 2*DefaultMaxHeaderBytes, resp.StatusCode)
	}
}

// TestReadTimeout: a client that never finishes its headers is cut off.
func TestReadTimeout(t *testing.T) {
	addr := serve(t, http.HandlerFunc(ok), Options{ReadTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

// TestWriteTimeout: an answer that takes longer than the write timeout is
// cut off, an event stream is not.
func TestWriteTimeout(t *testing.T) {
	const d = 50 * time.Millisecond
	slow := func(ct string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ct)
			rc := http.NewResponseController(w)
			for i := range 3 {
				fmt.Fprintf(w, "data: %d\n\n", i)
				if err := rc.Flush(); err != nil {
					return
				}
				time.Sleep(d)
			}
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/plain", slow("text/plain"))
	mux.Handle("/events", slow("text/event-stream"))
	addr := serve(t, mux, Options{WriteTimeout: d})
	for path, complete := range map[string]bool{"/plain": false, "/events": true} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := err == nil && strings.Contains(string(b), "data: 2"); got != complete {
			t.Errorf("GET %s: complete = %v (%q, %v), want %v", path, got, b, err, complete)
		}
	}
}
