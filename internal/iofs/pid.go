package iofs

import (
	"bytes"
	"strconv"
	"sync"
	"syscall"
)

// pids maps the thread id FUSE reports as the caller (the kernel puts the
// calling thread's id in each request) to its process id (the thread group
// id), which is what the sampler attributes to a job. Kernel threads
// (writeback, async readahead workers) and unknown ids map to 0: the caller
// then falls back to the process that opened the handle.
type pids struct {
	proc string // "/proc" under the configured root
	max  int

	mu  sync.Mutex
	m   map[uint32]pidEntry
	gen uint64
}

type pidEntry struct {
	tgid uint32
	used uint64
}

func newPids(proc string, max int) *pids {
	return &pids{proc: proc, max: max, m: make(map[uint32]pidEntry)}
}

// resolve returns the process of thread tid, 0 for a kernel thread or an
// id that no longer exists.
func (p *pids) resolve(tid uint32) uint32 {
	if tid == 0 {
		return 0
	}
	p.mu.Lock()
	e, ok := p.m[tid]
	if ok {
		if e.used != p.gen {
			e.used = p.gen
			p.m[tid] = e
		}
		p.mu.Unlock()
		return e.tgid
	}
	p.mu.Unlock()

	tgid := p.read(tid) // a syscall: outside the lock

	p.mu.Lock()
	if len(p.m) < p.max {
		p.m[tid] = pidEntry{tgid: tgid, used: p.gen}
	}
	p.mu.Unlock()
	return tgid
}

// tick forgets threads not seen for 10 intervals, so a reused thread id is
// resolved again.
func (p *pids) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	for tid, e := range p.m {
		if e.used+10 < p.gen {
			delete(p.m, tid)
		}
	}
}

// read parses Tgid and PPid of /proc/<tid>/status; children of kthreadd
// (pid 2) and kthreadd itself are kernel threads.
func (p *pids) read(tid uint32) uint32 {
	var buf [2048]byte
	path := p.proc + "/" + strconv.FormatUint(uint64(tid), 10) + "/status"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	n, err := syscall.Read(fd, buf[:])
	syscall.Close(fd)
	if err != nil || n <= 0 {
		return 0
	}
	tgid, ppid := statusField(buf[:n], "\nTgid:"), statusField(buf[:n], "\nPPid:")
	if tgid == 2 || ppid == 2 || tgid == 0 {
		return 0
	}
	return uint32(tgid)
}

// statusField returns the number after key in a status file, 0 if absent.
func statusField(b []byte, key string) uint64 {
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return 0
	}
	b = b[i+len(key):]
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	var v uint64
	for len(b) > 0 && b[0] >= '0' && b[0] <= '9' && v < 1<<32 {
		v = v*10 + uint64(b[0]-'0')
		b = b[1:]
	}
	if v >= 1<<32 {
		return 0
	}
	return v
}
