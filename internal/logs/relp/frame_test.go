package relp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseFrame(t *testing.T) {
	cases := []struct {
		in   string
		txnr uint32
		cmd  string
		data string
		n    int    // 0: incomplete
		err  string // substring of the error
	}{
		{in: "1 open 5 a=b,c\n", txnr: 1, cmd: "open", data: "a=b,c", n: 15},
		{in: "12 close 0\n", txnr: 12, cmd: "close", n: 11},
		{in: "3 syslog 2 hi\nrest", txnr: 3, cmd: "syslog", data: "hi", n: 14},
		{in: "999999999 syslog 1 x\n", txnr: 999999999, cmd: "syslog", data: "x", n: 21},
		{in: "3 syslog 2 hi"},
		{in: "3 sys"},
		{in: ""},
		{in: "1234567890 syslog 1 x\n", err: "longer than 9"},
		{in: "1 " + strings.Repeat("a", 33) + " 0\n", err: "longer than 32"},
		{in: "1 syslog 1234567890 x", err: "longer than 9"},
		{in: "x open 0\n", err: "want transaction number"},
		{in: "1\topen 0\n", err: "space after"},
		{in: "1 op3n 0\n", err: "command letters"},
		{in: "1 open x\n", err: "want data length"},
		{in: "1 open 0 \n", err: "followed by"},
		{in: "1 open 2\nab\n", err: "followed by"},
		{in: "1 syslog 2 abc\n", err: "want LF"},
		{in: "1 syslog 100 x", err: "above the maximum"},
		{in: "1  open 0\n", err: "command letters"},
	}
	for _, c := range cases {
		h, data, n, err := ParseFrame([]byte(c.in), 64)
		if c.err != "" {
			if err == nil || !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if n != c.n || (n > 0 && (h.Txnr != c.txnr || h.Cmd != c.cmd || string(data) != c.data)) {
			t.Errorf("%q: %+v %q n=%d, want %d %s %q n=%d", c.in, h, data, n, c.txnr, c.cmd, c.data, c.n)
		}
	}
}

func TestAppendFrame(t *testing.T) {
	got := string(AppendFrame([]byte("x"), 7, "rsp", []byte("200 OK")))
	if got != "x7 rsp 6 200 OK\n" {
		t.Fatalf("got %q", got)
	}
	if got := string(AppendFrame(nil, 0, "serverclose", nil)); got != "0 serverclose 0\n" {
		t.Fatalf("got %q", got)
	}
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{"1 open 5 a=b,c\n", "12 close 0\n", "3 syslog 2 hi\n4 syslog 0\n", "0 serverclose 0\n", "1 syslog 99 ", "9999999999", "1 a 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 32
		h, data, n, err := ParseFrame(in, max)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v does not wrap ErrFrame", err)
			}
			return
		}
		if n == 0 {
			return
		}
		if n > len(in) || len(data) != h.DataLen || h.DataLen > max || len(h.Cmd) == 0 || len(h.Cmd) > 32 {
			t.Fatalf("%q: %+v data %q n %d", in, h, data, n)
		}
		// What parses re-encodes to a frame that parses the same.
		out := AppendFrame(nil, h.Txnr, h.Cmd, data)
		h2, data2, n2, err := ParseFrame(out, max)
		if err != nil || n2 != len(out) || h2.Txnr != h.Txnr || h2.Cmd != h.Cmd || !bytes.Equal(data2, data) {
			t.Fatalf("%q re-encoded as %q: %+v %q %d %v", in, out, h2, data2, n2, err)
		}
	})
}

// fakeConn serves reads from a reader; deadlines are ignored.
type fakeConn struct {
	net.Conn
	r io.Reader
}

func (c *fakeConn) Read(b []byte) (int, error)      { return c.r.Read(b) }
func (c *fakeConn) SetReadDeadline(time.Time) error { return nil }

// FuzzReader runs the connection reader over arbitrary bytes: it must end
// with an error, never return more data than the bound, and never produce
// more frames than its input could hold.
func FuzzReader(f *testing.F) {
	f.Add([]byte("1 open 5 a=b,c\n2 syslog 40 " + strings.Repeat("y", 40) + "\n3 close 0\n"))
	f.Add([]byte("1 syslog 3 abc\n2 syslog 2 x"))
	f.Add([]byte("1 syslog 100 " + strings.Repeat("z", 100) + "\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 16
		var stop atomic.Bool
		rd := newReader(&fakeConn{r: bytes.NewReader(in)}, max, 0, 0, &stop)
		for i := 0; ; i++ {
			h, data, cut, err := rd.next()
			if err != nil {
				return
			}
			if len(data) > max || (cut && len(data) != max) || (!cut && len(data) != h.DataLen) {
				t.Fatalf("frame %+v data %d bytes cut %v", h, len(data), cut)
			}
			if i > len(in) {
				t.Fatal("more frames than input bytes")
			}
		}
	})
}

// TestReaderCutsLongSyslog checks that a syslog frame above the bound is
// cut, its rest skipped, and the next frame read normally.
func TestReaderCutsLongSyslog(t *testing.T) {
	in := "1 syslog 100 " + strings.Repeat("z", 100) + "\n2 syslog 2 ok\n3 open 100 " + strings.Repeat("o", 100) + "\n"
	var stop atomic.Bool
	rd := newReader(&fakeConn{r: strings.NewReader(in)}, 16, 0, 0, &stop)
	h, data, cut, err := rd.next()
	if err != nil || !cut || string(data) != strings.Repeat("z", 16) || h.Txnr != 1 {
		t.Fatalf("first: %+v %q %v %v", h, data, cut, err)
	}
	h, data, cut, err = rd.next()
	if err != nil || cut || string(data) != "ok" || h.Txnr != 2 {
		t.Fatalf("second: %+v %q %v %v", h, data, cut, err)
	}
	if _, _, _, err = rd.next(); !errors.Is(err, ErrFrame) {
		t.Fatalf("oversized open: %v, want ErrFrame", err)
	}
}
