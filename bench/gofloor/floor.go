package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// floorArgs are bench/readfloor/readfloor.c's options, so that
// bench/samplercost can hand the same list to both floors.
type floorArgs struct {
	iv, every            int64
	rusage, uname, adjtx bool
	netlink              bool
	procDir              string
	procsEvery           int64
	reads, polls, stats  strList
}

type strList []string

func (l *strList) String() string     { return strings.Join(*l, ",") }
func (l *strList) Set(s string) error { *l = append(*l, s); return nil }

// runFloor is readfloor.c in Go, waiting and reading as vigil-sampler
// does: an absolute CLOCK_REALTIME timerfd armed each tick and read through
// the runtime's poller, and raw system calls for every read, so that only
// the thread blocked in epoll wakes. It makes the same calls as readfloor
// and parses nothing; what it costs above readfloor is the Go runtime's
// wake-up and idle path, and what vigil-sampler costs above it is parsing,
// bookkeeping and encoding. It runs until killed.
func runFloor(a *floorArgs) error {
	if a.iv <= 0 || a.every <= 0 || a.procsEvery <= 0 {
		return fmt.Errorf("-i, -k and -Q must be positive")
	}
	type rfile struct {
		fd  uintptr
		buf []byte // grown like kernfs.File's, one pread a tick
	}
	var rs []rfile
	for _, p := range a.reads {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		rs = append(rs, rfile{fd: f.Fd(), buf: make([]byte, 4096)})
	}
	type pollfd struct {
		fd             int32
		events, revent int16
	}
	var pfds []pollfd
	for _, p := range a.polls {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		pfds = append(pfds, pollfd{fd: int32(f.Fd()), events: 0x2 /* POLLPRI */})
	}
	var paths [][]byte
	for _, p := range a.stats {
		paths = append(paths, append([]byte(p), 0))
	}
	big := make([]byte, 1<<20)
	nl := -1
	var err error
	if a.netlink {
		fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		nl = fd
	}
	var pr *procReader
	if a.procDir != "" {
		if pr, err = newProcReader(a.procDir); err != nil {
			return err
		}
	}
	t, err := newTimer()
	if err != nil {
		return err
	}
	// RTM_GETSTATS dump request: nlmsghdr (16 bytes) + if_stats_msg (12).
	var req [28]byte
	binary.NativeEndian.PutUint32(req[0:], 28)
	binary.NativeEndian.PutUint16(req[4:], 94) // RTM_GETSTATS
	binary.NativeEndian.PutUint16(req[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[24:], 1<<0) // IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64)
	var st syscall.Statfs_t
	var ru syscall.Rusage
	var un syscall.Utsname
	var tx syscall.Timex
	next := (time.Now().UnixNano()/a.iv + 1) * a.iv
	for tick := int64(0); ; tick++ {
		if err := t.wait(next); err != nil {
			return err
		}
		for i := range rs {
			r := &rs[i]
			for {
				n, _, _ := syscall.RawSyscall6(syscall.SYS_PREAD64, r.fd, uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)), 0, 0, 0)
				if int(n) != len(r.buf) || len(r.buf) >= 1<<20 {
					break
				}
				r.buf = make([]byte, 2*len(r.buf))
			}
		}
		if len(pfds) > 0 {
			var zero syscall.Timespec
			syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfds[0])), uintptr(len(pfds)), uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
			if tick%a.every == 0 {
				for _, p := range pfds {
					syscall.RawSyscall6(syscall.SYS_PREAD64, uintptr(p.fd), uintptr(unsafe.Pointer(&big[0])), uintptr(len(big)), 0, 0, 0)
				}
			}
		}
		for _, p := range paths {
			syscall.RawSyscall(syscall.SYS_STATFS, uintptr(unsafe.Pointer(&p[0])), uintptr(unsafe.Pointer(&st)), 0)
		}
		if a.rusage {
			syscall.RawSyscall(syscall.SYS_GETRUSAGE, syscall.RUSAGE_SELF, uintptr(unsafe.Pointer(&ru)), 0)
		}
		if a.uname {
			syscall.RawSyscall(syscall.SYS_UNAME, uintptr(unsafe.Pointer(&un)), 0, 0)
		}
		if a.adjtx {
			tx = syscall.Timex{}
			syscall.RawSyscall(syscall.SYS_ADJTIMEX, uintptr(unsafe.Pointer(&tx)), 0, 0)
		}
		if nl >= 0 {
			binary.NativeEndian.PutUint32(req[8:], uint32(tick)+1)
			if n, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, uintptr(nl), uintptr(unsafe.Pointer(&req[0])), 28, 0, 0, 0); e == 0 && n == 28 {
				dumpDone(nl, big)
			}
		}
		if pr != nil && tick%a.procsEvery == 0 {
			pr.read(tick+1, big)
		}
		// Skip ticks that already passed, as the sampler does.
		next = (time.Now().UnixNano()/a.iv + 1) * a.iv
	}
}

// dumpDone reads a netlink dump's replies until NLMSG_DONE or NLMSG_ERROR.
func dumpDone(fd int, buf []byte) {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), syscall.MSG_DONTWAIT, 0, 0)
		if e != 0 || int(n) <= 0 {
			return
		}
		for b := buf[:n]; len(b) >= 16; {
			l := int(binary.NativeEndian.Uint32(b))
			typ := binary.NativeEndian.Uint16(b[4:])
			if typ == syscall.NLMSG_DONE || typ == syscall.NLMSG_ERROR {
				return
			}
			l = (l + 3) &^ 3
			if l < 16 || l > len(b) {
				break
			}
			b = b[l:]
		}
	}
}

// absTimer is the sampler's kernel timer, cut down: a timerfd armed for
// an absolute instant inside the poller's read callback, which then parks
// without a read that could only say EAGAIN.
type absTimer struct {
	rc   syscall.RawConn
	spec [2]syscall.Timespec // interval (zero), value
	arm  bool
	exp  [8]byte
	read func(fd uintptr) bool
}

func newTimer() (*absTimer, error) {
	fd, _, e := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, 0 /* CLOCK_REALTIME */, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if e != 0 {
		return nil, fmt.Errorf("timerfd_create: %w", e)
	}
	rc, err := os.NewFile(fd, "timerfd").SyscallConn()
	if err != nil {
		return nil, err
	}
	t := &absTimer{rc: rc}
	t.read = func(fd uintptr) bool {
		if t.arm {
			t.arm = false
			syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, fd, 1 /* TFD_TIMER_ABSTIME */, uintptr(unsafe.Pointer(&t.spec)), 0, 0, 0)
			return false
		}
		_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&t.exp[0])), 8)
		return e != syscall.EAGAIN
	}
	return t, nil
}

func (t *absTimer) wait(at int64) error {
	t.spec[1] = syscall.NsecToTimespec(at)
	t.arm = true
	return t.rc.Read(t.read)
}

// procReader lists a /proc and preads each process's stat file, kept open
// while the process lives: the least the procs plugin reads.
type procReader struct {
	dir   uintptr
	fds   map[int]uintptr
	seen  map[int]int64
	dents []byte
	path  []byte
}

func newProcReader(dir string) (*procReader, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return &procReader{dir: uintptr(fd), fds: map[int]uintptr{}, seen: map[int]int64{},
		dents: make([]byte, 1<<16), path: make([]byte, 0, 32)}, nil
}

func (p *procReader) read(tick int64, buf []byte) {
	syscall.RawSyscall(syscall.SYS_LSEEK, p.dir, 0, 0)
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_GETDENTS64, p.dir, uintptr(unsafe.Pointer(&p.dents[0])), uintptr(len(p.dents)))
		if e != 0 || int(n) <= 0 {
			break
		}
		for off := 0; off < int(n); {
			reclen := int(binary.NativeEndian.Uint16(p.dents[off+16:]))
			name := p.dents[off+19 : off+reclen]
			off += reclen
			pid, i := 0, 0
			for ; i < len(name) && name[i] >= '0' && name[i] <= '9'; i++ {
				pid = pid*10 + int(name[i]-'0')
			}
			if i == 0 || i >= len(name) || name[i] != 0 || pid <= 0 {
				continue
			}
			fd, ok := p.fds[pid]
			if !ok {
				p.path = append(append(p.path[:0], name[:i]...), "/stat\x00"...)
				r, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, p.dir, uintptr(unsafe.Pointer(&p.path[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
				if e != 0 {
					continue
				}
				fd = r
				p.fds[pid] = fd
			}
			p.seen[pid] = tick
			syscall.RawSyscall6(syscall.SYS_PREAD64, fd, uintptr(unsafe.Pointer(&buf[0])), 4096, 0, 0, 0)
		}
	}
	for pid, fd := range p.fds { // close the stat files of processes gone
		if p.seen[pid] != tick {
			syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
			delete(p.fds, pid)
			delete(p.seen, pid)
		}
	}
}
