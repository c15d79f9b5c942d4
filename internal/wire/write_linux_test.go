package wire

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestRawWriterTCP: the connection's writer delivers every byte, in order,
// over loopback TCP, including writes larger than the socket buffers (which
// wait in the poller), and a steady write allocates nothing: it ran once
// per tick on the streaming sampler.
func TestRawWriterTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	w := newRawWriter(conn)
	if w.rc == nil {
		t.Fatal("a TCP connection is written through its RawConn")
	}
	var want bytes.Buffer
	frame := bytes.Repeat([]byte("0123456789abcdef"), 40) // a tick's frame
	for range 10 {
		if n, err := w.Write(frame); n != len(frame) || err != nil {
			t.Fatalf("write: %d, %v", n, err)
		}
		want.Write(frame)
	}
	if !testutil.RaceEnabled {
		if a := testing.AllocsPerRun(100, func() { _, _ = w.Write(frame) }); a != 0 {
			t.Errorf("%v allocations a write, want 0", a)
		}
		for range 101 { // AllocsPerRun runs it once more to warm up
			want.Write(frame)
		}
	}
	big := make([]byte, 8<<20) // far past the send and receive buffers
	for i := range big {
		big[i] = byte(i * 7)
	}
	if n, err := w.Write(big); n != len(big) || err != nil {
		t.Fatalf("large write: %d, %v", n, err)
	}
	want.Write(big)
	conn.Close()
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Errorf("received %d bytes, want the %d written", len(b), want.Len())
	}
	if _, err := w.Write(frame); err == nil {
		t.Error("write on a closed connection: no error")
	}
}
