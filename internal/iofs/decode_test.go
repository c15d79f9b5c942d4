package iofs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A test decoder of the appio contract, written from the contract's text
// rather than from the encoder, and a SOCK_SEQPACKET listener playing the
// sampler.

type hello struct {
	rank       int32
	intervalMs uint32
	exe, job   string
	client     string
}

type fileMsg struct {
	id, flags, pid uint32
	path           string
}

type intervalMsg struct {
	start, end uint64
	recs       []wireRec
}

type wireRec struct {
	id, pid uint32
	c       Counters
}

type message struct {
	typ      uint16
	hello    *hello
	file     *fileMsg
	interval *intervalMsg
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) n(k int) []byte {
	if r.err != nil || len(r.b) < k {
		r.err = errors.New("short payload")
		return make([]byte, k)
	}
	v := r.b[:k]
	r.b = r.b[k:]
	return v
}
func (r *reader) u16() uint16 { return binary.LittleEndian.Uint16(r.n(2)) }
func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.n(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.n(8)) }
func (r *reader) str() string {
	l := int(r.u16())
	if l > 4096 {
		r.err = fmt.Errorf("string of %d bytes", l)
		return ""
	}
	return string(r.n(l))
}

func decode(msg []byte) (message, error) {
	if len(msg) < 12 || string(msg[:4]) != "VIO1" {
		return message{}, fmt.Errorf("bad magic in %q", msg[:min(len(msg), 12)])
	}
	if v := binary.LittleEndian.Uint16(msg[4:]); v != 1 {
		return message{}, fmt.Errorf("version %d", v)
	}
	m := message{typ: binary.LittleEndian.Uint16(msg[6:])}
	if l := binary.LittleEndian.Uint32(msg[8:]); int(l) != len(msg)-12 {
		return message{}, fmt.Errorf("payload length %d, message has %d", l, len(msg)-12)
	}
	r := &reader{b: msg[12:]}
	switch m.typ {
	case 1:
		m.hello = &hello{rank: int32(r.u32()), intervalMs: r.u32(), exe: r.str(), job: r.str(), client: r.str()}
	case 2:
		m.file = &fileMsg{id: r.u32(), flags: r.u32(), pid: r.u32(), path: r.str()}
	case 3:
		iv := &intervalMsg{start: r.u64(), end: r.u64()}
		n := r.u32()
		if int(n)*296 != len(r.b) {
			return m, fmt.Errorf("%d records in %d bytes", n, len(r.b))
		}
		for range n {
			w := wireRec{id: r.u32(), pid: r.u32()}
			for i := range w.c {
				w.c[i] = r.u64()
			}
			iv.recs = append(iv.recs, w)
		}
		m.interval = iv
	case 4:
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes left over in message type %d", len(r.b), m.typ)
	}
	return m, r.err
}

// sampler is a fake sampler: it accepts connections and sums the counters
// per (path, pid), checking the protocol's rules as it goes.
type sampler struct {
	t    *testing.T
	path string
	ln   *net.UnixListener

	mu      sync.Mutex
	conns   []*net.UnixConn
	hellos  []hello
	sums    map[key]*Counters
	byes    int
	msgs    int
	maxRecs int
	errs    []error
}

type key struct {
	path string
	pid  uint32
}

func newSampler(t *testing.T) *sampler {
	t.Helper()
	return newSamplerAt(t, filepath.Join(t.TempDir(), "appio.sock"))
}

func newSamplerAt(t *testing.T, p string) *sampler {
	t.Helper()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: p, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	s := &sampler{t: t, path: p, ln: ln, sums: map[key]*Counters{}}
	go s.accept()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *sampler) accept() {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// close stops the sampler as a restart would: listener and connections.
func (s *sampler) close() {
	s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

func (s *sampler) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *sampler) serve(c *net.UnixConn) {
	defer c.Close()
	buf := make([]byte, 65536+1)
	first := true
	files := map[uint32]fileMsg{}
	for {
		n, err := c.Read(buf)
		if err != nil || n == 0 {
			return
		}
		if n > 65536 {
			s.fail(fmt.Errorf("message over 64 KiB"))
			return
		}
		m, err := decode(buf[:n])
		if err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		s.msgs++
		switch {
		case first && m.typ != 1:
			s.errs = append(s.errs, fmt.Errorf("first message is type %d, not HELLO", m.typ))
		case m.hello != nil:
			s.hellos = append(s.hellos, *m.hello)
		case m.file != nil:
			if m.file.id == 0 {
				s.errs = append(s.errs, errors.New("FILE with id 0"))
			}
			if _, dup := files[m.file.id]; dup {
				s.errs = append(s.errs, fmt.Errorf("FILE id %d sent twice", m.file.id))
			}
			files[m.file.id] = *m.file
		case m.interval != nil:
			s.maxRecs = max(s.maxRecs, len(m.interval.recs))
			if m.interval.end <= m.interval.start {
				s.errs = append(s.errs, fmt.Errorf("interval [%d, %d)", m.interval.start, m.interval.end))
			}
			for _, r := range m.interval.recs {
				k := key{pid: r.pid}
				if r.id != 0 {
					f, ok := files[r.id]
					if !ok {
						s.errs = append(s.errs, fmt.Errorf("record of file %d before its FILE", r.id))
						continue
					}
					if f.pid != r.pid || f.flags&1 == 0 {
						s.errs = append(s.errs, fmt.Errorf("FILE %+v for a record of pid %d", f, r.pid))
					}
					k.path = f.path
				}
				if r.c == (Counters{}) {
					s.errs = append(s.errs, errors.New("all-zero record"))
				}
				sum := s.sums[k]
				if sum == nil {
					sum = new(Counters)
					s.sums[k] = sum
				}
				for i, v := range r.c {
					sum[i] += v
				}
			}
		case m.typ == 4:
			s.byes++
		}
		first = false
		s.mu.Unlock()
	}
}

// get returns the sums for (path, pid) so far.
func (s *sampler) get(path string, pid uint32) Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.sums[key{path, pid}]; c != nil {
		return *c
	}
	return Counters{}
}

// wait polls until cond holds on the sums of (path, pid).
func (s *sampler) wait(path string, pid uint32, what string, cond func(c Counters) bool) Counters {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := s.get(path, pid)
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not reported for %s pid %d within 10s; have %v", what, path, pid, c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *sampler) check() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range s.errs {
		s.t.Error("protocol:", err)
	}
}
