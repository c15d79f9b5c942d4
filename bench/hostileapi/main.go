// Command hostileapi is a misbehaving stand-in for vigil server's HTTP API,
// for measuring what the client commands do against it: "endless" answers
// every request with 200 and a body without end (bounded by -max), "stuck"
// sends the header and nothing more. Loopback only; it exits after -for.
//
//	go run ./bench/hostileapi -mode endless &
//	/usr/bin/time -f '%M KiB %e s' bin/vigil query up --server http://127.0.0.1:18777
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:18777", "loopback address to listen on")
	mode := flag.String("mode", "endless", "endless or stuck")
	maxBytes := flag.Int64("max", 4<<30, "bytes of an endless answer at most")
	life := flag.Duration("for", 5*time.Minute, "exit after this long")
	flag.Parse()
	if err := run(*addr, *mode, *maxBytes, *life); err != nil {
		fmt.Fprintln(os.Stderr, "hostileapi:", err)
		os.Exit(1)
	}
}

func run(addr, mode string, maxBytes int64, life time.Duration) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-listen %s: want a loopback address", addr)
	}
	if mode != "endless" && mode != "stuck" {
		return fmt.Errorf("-mode %q: want endless or stuck", mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), life)
	defer cancel()
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":"`)
		w.(http.Flusher).Flush()
		if mode == "stuck" {
			select {
			case <-r.Context().Done():
			case <-ctx.Done():
			}
			return
		}
		for sent := int64(0); sent < maxBytes && ctx.Err() == nil; sent += int64(len(chunk)) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
