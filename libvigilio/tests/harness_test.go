// Package libvigiliotest runs real programs under LD_PRELOAD=libvigilio.so
// against a SOCK_SEQPACKET listener that decodes the appio protocol
// (docs/format/appio.md) strictly, and asserts exact counts.
package libvigiliotest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Counter indexes of an INTERVAL record.
const (
	cOpens = iota
	cCloses
	cReads
	cWrites
	cBytesRead
	cBytesWritten
	cReadNS
	cWriteNS
	cMetaNS
	cSeeks
	cSyncs
	cStats
	cMmaps
	cMetaOther
	cSeq
	cRandom
	cRHist
	cWHist     = cRHist + 10
	nCounters  = cWHist + 10
	recordSize = 8 + 8*nCounters
)

type counters [nCounters]uint64

// conn is what one connection (one process) reported.
type conn struct {
	pid       int32
	rank      int32
	interval  uint32
	exe, job  string
	client    string
	files     map[uint32]string
	totals    map[uint32]*counters // by file id; 0 = other files
	intervals int
	bye       bool
	closed    bool
	err       error
}

type listener struct {
	path  string
	ln    *net.UnixListener
	mu    sync.Mutex
	cs    []*conn
	socks []*net.UnixConn
}

func listen(t *testing.T) *listener {
	t.Helper()
	return listenAt(t, filepath.Join(t.TempDir(), "appio.sock"))
}

// listenAt listens on path (a sampler started again on the same socket).
func listenAt(t *testing.T, path string) *listener {
	t.Helper()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{path: path, ln: ln}
	t.Cleanup(func() { ln.Close() })
	go l.accept()
	return l
}

func (l *listener) accept() {
	for {
		c, err := l.ln.AcceptUnix()
		if err != nil {
			return
		}
		go l.serve(c)
	}
}

// stop closes the socket and every connection, as a sampler that exits.
func (l *listener) stop() {
	l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.socks {
		c.Close()
	}
}

func (l *listener) serve(c *net.UnixConn) {
	defer c.Close()
	l.mu.Lock()
	l.socks = append(l.socks, c)
	l.mu.Unlock()
	cc := &conn{files: map[uint32]string{}, totals: map[uint32]*counters{}}
	if raw, err := c.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
				cc.pid = cred.Pid
			}
		})
	}
	l.mu.Lock()
	l.cs = append(l.cs, cc)
	l.mu.Unlock()
	buf := make([]byte, 65537)
	for first := true; ; first = false {
		n, err := c.Read(buf)
		if err != nil || n == 0 {
			l.mu.Lock()
			cc.closed = true
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		err = cc.decode(buf[:n], first)
		if err != nil && cc.err == nil {
			cc.err = err
		}
		l.mu.Unlock()
	}
}

func str(p []byte) (string, []byte, error) {
	if len(p) < 2 {
		return "", nil, fmt.Errorf("string length cut short")
	}
	n := int(binary.LittleEndian.Uint16(p))
	if n > 4096 || len(p) < 2+n {
		return "", nil, fmt.Errorf("string of %d bytes, %d left", n, len(p)-2)
	}
	return string(p[2 : 2+n]), p[2+n:], nil
}

// decode checks one message against the contract and adds it to cc.
func (cc *conn) decode(m []byte, first bool) error {
	le := binary.LittleEndian
	if len(m) > 65536 || len(m) < 12 || string(m[:4]) != "VIO1" || le.Uint16(m[4:]) != 1 ||
		int(le.Uint32(m[8:])) != len(m)-12 {
		return fmt.Errorf("bad header in %d-byte message %x", len(m), m[:min(len(m), 12)])
	}
	typ, p := le.Uint16(m[6:]), m[12:]
	if first != (typ == 1) {
		return fmt.Errorf("message type %d first=%v: HELLO must come first, once", typ, first)
	}
	if cc.bye {
		return fmt.Errorf("message type %d after BYE", typ)
	}
	var err error
	switch typ {
	case 1:
		if len(p) < 8 {
			return fmt.Errorf("HELLO of %d bytes", len(p))
		}
		cc.rank, cc.interval = int32(le.Uint32(p)), le.Uint32(p[4:])
		p = p[8:]
		for _, s := range []*string{&cc.exe, &cc.job, &cc.client} {
			if *s, p, err = str(p); err != nil {
				return fmt.Errorf("HELLO: %v", err)
			}
		}
		if len(p) != 0 {
			return fmt.Errorf("HELLO: %d trailing bytes", len(p))
		}
	case 2:
		if len(p) < 12 {
			return fmt.Errorf("FILE of %d bytes", len(p))
		}
		id := le.Uint32(p)
		var path string
		if path, p, err = str(p[12:]); err != nil || len(p) != 0 || id == 0 || path == "" || path[0] != '/' {
			return fmt.Errorf("FILE %d %q: %v, %d trailing bytes", id, path, err, len(p))
		}
		if _, dup := cc.files[id]; dup {
			return fmt.Errorf("FILE %d sent twice", id)
		}
		cc.files[id] = path
	case 3:
		if len(p) < 20 {
			return fmt.Errorf("INTERVAL of %d bytes", len(p))
		}
		start, end, n := le.Uint64(p), le.Uint64(p[8:]), int(le.Uint32(p[16:]))
		iv := uint64(cc.interval) * 1e6
		if iv == 0 || start%iv != 0 || end <= start || end > start+iv {
			return fmt.Errorf("INTERVAL [%d, %d) not aligned to %d ms", start, end, cc.interval)
		}
		p = p[20:]
		if len(p) != n*recordSize {
			return fmt.Errorf("INTERVAL of %d records in %d bytes", n, len(p))
		}
		cc.intervals++
		for i := 0; i < n; i++ {
			r := p[i*recordSize:]
			id := le.Uint32(r)
			if _, ok := cc.files[id]; !ok && id != 0 {
				return fmt.Errorf("record of file %d before its FILE", id)
			}
			if le.Uint32(r[4:]) != 0 {
				return fmt.Errorf("record with pid %d from the library", le.Uint32(r[4:]))
			}
			tot := cc.totals[id]
			if tot == nil {
				tot = &counters{}
				cc.totals[id] = tot
			}
			zero := true
			for k := 0; k < nCounters; k++ {
				v := le.Uint64(r[8+8*k:])
				zero = zero && v == 0
				tot[k] += v
			}
			if zero {
				return fmt.Errorf("all-zero record of file %d", id)
			}
		}
	case 4:
		if len(p) != 0 {
			return fmt.Errorf("BYE with %d payload bytes", len(p))
		}
		cc.bye = true
	}
	return nil
}

// snapshot is a consistent copy of what arrived so far.
type snapshot []conn

func (l *listener) snap(t *testing.T) snapshot {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var s snapshot
	for _, c := range l.cs {
		if c.err != nil {
			t.Fatalf("pid %d sent a bad message: %v", c.pid, c.err)
		}
		cp := *c
		cp.totals = map[uint32]*counters{}
		for id, v := range c.totals {
			x := *v
			cp.totals[id] = &x
		}
		cp.files = map[uint32]string{}
		for id, p := range c.files {
			cp.files[id] = p
		}
		s = append(s, cp)
	}
	return s
}

// file sums the counters of path over the connections of pid (0: any).
func (s snapshot) file(path string, pid int32) counters {
	var sum counters
	for _, c := range s {
		if pid != 0 && c.pid != pid {
			continue
		}
		for id, p := range c.files {
			// A file announced before its first counters has none yet.
			if tot := c.totals[id]; p == path && tot != nil {
				for k, v := range tot {
					sum[k] += v
				}
			}
		}
	}
	return sum
}

// waitBye polls until n connections said BYE and closed.
func (l *listener) waitBye(t *testing.T, n int) snapshot {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := l.snap(t)
		done := 0
		for _, c := range s {
			if c.bye && c.closed {
				done++
			}
		}
		if done >= n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections said BYE in 10 s: %+v", done, n, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	buildOnce sync.Once
	lib       string
	progs     string
	buildErr  error
)

// build makes bin/libvigilio.so with the library's Makefile and the C test programs.
func build(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testutil.MissingPeer(t, "gcc not installed (apt-get install gcc make)")
	}
	if _, err := exec.LookPath("make"); err != nil {
		testutil.MissingPeer(t, "make not installed (apt-get install make)")
	}
	buildOnce.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		dir := filepath.Dir(here)
		out, err := exec.Command("make", "-s", "-C", filepath.Dir(dir)).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("make -C libvigilio: %v\n%s", err, out)
			return
		}
		lib = filepath.Join(filepath.Dir(filepath.Dir(dir)), "bin", "libvigilio.so")
		tmp, err := os.MkdirTemp("", "libvigilio-progs")
		if err != nil {
			buildErr = err
			return
		}
		progs = filepath.Join(tmp, "progs")
		out, err = exec.Command("gcc", "-O2", "-Wall", "-Werror", "-pthread", "-o", progs,
			filepath.Join(dir, "testdata", "progs.c")).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("gcc testdata/progs.c: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
}

// command is name args under LD_PRELOAD with the listener's socket and env.
func (l *listener) command(t *testing.T, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	build(t)
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "VIGIL_APPIO_SOCKET="+l.path)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// run runs the command and fails the test unless it exits 0.
func (l *listener) run(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := l.command(t, env, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out.String())
	}
}

func eq(t *testing.T, what string, got, want uint64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

// waitFile polls until the counters of path (all processes) satisfy done.
func (l *listener) waitFile(t *testing.T, path string, done func(counters) bool) counters {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := l.snap(t).file(path, 0)
		if done(c) || time.Now().After(deadline) {
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
}
