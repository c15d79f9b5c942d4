package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Bounds on what a check reads.
const (
	maxFileBytes = 4 << 20 // mountinfo of a node with many mounts
	maxProcs     = 1 << 20 // /proc entries scanned by a process check
)

// readFile reads a (kernel) file under the root, bounded.
func readFile(e *env, rel string) ([]byte, error) {
	f, err := os.Open(e.fs.Path(rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(&limited{f, maxFileBytes}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// limited is io.LimitReader that fails instead of truncating silently.
type limited struct {
	f *os.File
	n int
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("%s: longer than %d bytes", l.f.Name(), maxFileBytes)
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	n, err := l.f.Read(p)
	l.n -= n
	return n, err
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	point, fstype, source string
	readOnly              bool
}

// parseMountinfo finds the last (visible) mount on point in a mountinfo
// file: "id parent maj:min root point opts [optional...] - fstype source superopts".
func parseMountinfo(data []byte, point string) (mount, bool) {
	var found mount
	ok := false
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		f := strings.Fields(string(line))
		if len(f) < 10 {
			continue
		}
		if unescapeOctal(f[4]) != point {
			continue
		}
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+2 >= len(f) {
			continue
		}
		m := mount{point: point, fstype: f[sep+1], source: unescapeOctal(f[sep+2])}
		m.readOnly = hasOpt(f[5], "ro") || (sep+3 < len(f) && hasOpt(f[sep+3], "ro"))
		found, ok = m, true
	}
	return found, ok
}

func hasOpt(opts, o string) bool {
	for _, v := range strings.Split(opts, ",") {
		if v == o {
			return true
		}
	}
	return false
}

// unescapeOctal undoes the kernel's \ooo escapes of space, tab, newline
// and backslash in mountinfo paths.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountCache keeps mountinfo for the mount checks of one round: the
// kernel generates the file on each read, at a cost that grows with the
// mounts.
type mountCache struct {
	mu   sync.Mutex
	at   time.Time
	data []byte
}

func (mc *mountCache) get(e *env) ([]byte, error) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.data == nil || time.Since(mc.at) > procCacheAge {
		data, err := readFile(e, "proc/self/mountinfo")
		if err != nil {
			return nil, err
		}
		mc.data, mc.at = data, time.Now()
	}
	return mc.data, nil
}

func (mc *mountCache) expire() {
	mc.mu.Lock()
	mc.data = nil
	mc.mu.Unlock()
}

func mountCheck(point string, rw, ro bool, fstype, source string) func(context.Context, *env) outcome {
	return func(_ context.Context, e *env) outcome {
		data, err := e.mounts.get(e)
		if err != nil {
			return fail("read mountinfo: %v", err)
		}
		m, ok := parseMountinfo(data, point)
		switch {
		case !ok:
			return fail("%s is not mounted", point)
		case fstype != "" && m.fstype != fstype:
			return fail("%s is %s, want %s", point, m.fstype, fstype)
		case source != "" && m.source != source:
			return fail("%s is mounted from %s, want %s", point, m.source, source)
		case rw && m.readOnly:
			return fail("%s is mounted read-only", point)
		case ro && !m.readOnly:
			return fail("%s is mounted read-write", point)
		}
		return pass()
	}
}

func writableCheck(dir string) func(context.Context, *env) outcome {
	return func(_ context.Context, e *env) outcome {
		f, err := os.CreateTemp(e.fs.Path(dir), ".vigil-health-*")
		if err != nil {
			return fail("%s: cannot create a file: %v", dir, cleanErr(err))
		}
		_, werr := f.Write([]byte("vigil\n"))
		cerr := f.Close()
		rerr := os.Remove(f.Name())
		for _, err := range []error{werr, cerr, rerr} {
			if err != nil {
				return fail("%s: %v", dir, cleanErr(err))
			}
		}
		return pass()
	}
}

// cleanErr drops the path from a *PathError (it carries the root prefix).
func cleanErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func freeSpaceCheck(dir string, minPct float64, minBytes uint64) func(context.Context, *env) outcome {
	return func(_ context.Context, e *env) outcome {
		total, avail, err := statfs(e.fs.Path(dir))
		if err != nil {
			return fail("statfs %s: %v", dir, cleanErr(err))
		}
		if minPct >= 0 {
			pct := 0.0
			if total > 0 {
				pct = float64(avail) / float64(total) * 100
			}
			// The reason leaves the value out: it would make a new
			// failure series every time the usage moved.
			if pct < minPct {
				return fail("%s: less than %g%% free", dir, minPct)
			}
			return pass()
		}
		if avail < minBytes {
			return fail("%s: less than %s free", dir, size(minBytes))
		}
		return pass()
	}
}

// size formats bytes with a binary unit.
func size(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatUint(b, 10) + "B"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
}

// procCacheAge is how long one scan of /proc, or one read of mountinfo,
// serves every process or mount check: the checks of a round run within
// it, and it is shorter than any interval, so each run of a check reads
// afresh.
const procCacheAge = 500 * time.Millisecond

// procCache remembers, from the last scan of /proc, one process per
// command name. A check whose process is still there (its comm read
// again: one open, read, close) needs no scan; one whose process has gone
// scans again, and checks of processes not running share one scan per
// procCacheAge.
type procCache struct {
	mu   sync.Mutex
	at   time.Time // of the last scan
	pids map[string]string
	buf  [64]byte
}

// running reports whether a process with command name comm runs.
func (pc *procCache) running(ctx context.Context, e *env, comm string) (bool, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	gone := false
	if pid, ok := pc.pids[comm]; ok {
		if got, ok := readComm(e.fs.Path("proc", pid, "comm"), pc.buf[:]); ok && string(bytes.TrimRight(got, "\n")) == comm {
			return true, nil
		}
		gone = true // perhaps restarted under another pid: look again
	}
	if gone || pc.pids == nil || time.Since(pc.at) > procCacheAge {
		pids, err := scanComms(ctx, e, pc.buf[:])
		if err != nil {
			return false, err
		}
		pc.pids, pc.at = pids, time.Now()
	}
	_, ok := pc.pids[comm]
	return ok, nil
}

// expire makes the next check that misses scan again.
func (pc *procCache) expire() {
	pc.mu.Lock()
	pc.at = time.Time{}
	pc.mu.Unlock()
}

// scanComms maps the comm of every process under the root's /proc to
// its pid (directory name).
func scanComms(ctx context.Context, e *env, buf []byte) (map[string]string, error) {
	d, err := os.Open(e.fs.Path("proc"))
	if err != nil {
		return nil, fmt.Errorf("open /proc: %v", cleanErr(err))
	}
	defer d.Close()
	pids := make(map[string]string, 256)
	for seen := 0; seen < maxProcs; {
		names, err := d.Readdirnames(512)
		for _, n := range names {
			if n == "" || n[0] < '0' || n[0] > '9' {
				continue
			}
			seen++
			if got, ok := readComm(e.fs.Path("proc", n, "comm"), buf); ok {
				pids[string(bytes.TrimRight(got, "\n"))] = n
			}
		}
		if err != nil || len(names) == 0 {
			break
		}
		if ctx.Err() != nil {
			return nil, errors.New("scan of /proc timed out")
		}
	}
	return pids, nil
}

func processCheck(name string) func(context.Context, *env) outcome {
	// comm holds at most 15 bytes of the name.
	comm := name
	if len(comm) > 15 {
		comm = comm[:15]
	}
	return func(ctx context.Context, e *env) outcome {
		ok, err := e.procs.running(ctx, e, comm)
		switch {
		case err != nil:
			return fail("%v", err)
		case !ok:
			return fail("no process %s running", name)
		}
		return pass()
	}
}

// firstLine reads a one-line kernel file under the root.
func firstLine(e *env, rel string) (string, error) {
	data, err := readFile(e, rel)
	if err != nil {
		return "", cleanErr(err)
	}
	line, _ := kernfs.NextLine(data)
	return string(bytes.TrimSpace(line)), nil
}

func hostnameCheck(want string) func(context.Context, *env) outcome {
	return func(_ context.Context, e *env) outcome {
		got, err := firstLine(e, "proc/sys/kernel/hostname")
		if err != nil {
			return fail("read hostname: %v", err)
		}
		short, _, _ := strings.Cut(got, ".")
		if got == want || (!strings.Contains(want, ".") && short == want) {
			return pass()
		}
		return fail("hostname is %s, want %s", got, want)
	}
}

func kernelCheck(glob string) func(context.Context, *env) outcome {
	return func(_ context.Context, e *env) outcome {
		got, err := firstLine(e, "proc/sys/kernel/osrelease")
		if err != nil {
			return fail("read kernel release: %v", err)
		}
		if ok, _ := path.Match(glob, got); !ok {
			return fail("kernel is %s, want %s", got, glob)
		}
		return pass()
	}
}

// memTotal reads MemTotal (bytes) from meminfo.
func memTotal(data []byte) (uint64, bool) {
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		v, ok := bytes.CutPrefix(line, []byte("MemTotal:"))
		if !ok {
			continue
		}
		num, _ := kernfs.NextField(v)
		n, err := kernfs.ParseUint(num)
		return n * 1024, err == nil
	}
	return 0, false
}

func memoryCheck(want uint64, tolPct float64, tolBytes uint64) func(context.Context, *env) outcome {
	tol := tolBytes
	if tolPct >= 0 {
		tol = uint64(float64(want) * tolPct / 100)
	}
	return func(_ context.Context, e *env) outcome {
		data, err := readFile(e, "proc/meminfo")
		if err != nil {
			return fail("read meminfo: %v", cleanErr(err))
		}
		got, ok := memTotal(data)
		if !ok {
			return fail("no MemTotal in /proc/meminfo")
		}
		diff := got - want
		if got < want {
			diff = want - got
		}
		if diff > tol {
			return fail("MemTotal is %s, want %s ± %s", size(got), size(want), size(tol))
		}
		return pass()
	}
}

// countCPUs counts the CPUs of a list such as "0-3,8,10-11".
func countCPUs(s string) (int, bool) {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, false
			}
		}
		n += b - a + 1
	}
	return n, true
}

func cpusCheck(want int) func(context.Context, *env) outcome {
	return func(_ context.Context, e *env) outcome {
		s, err := firstLine(e, "sys/devices/system/cpu/online")
		if err != nil {
			return fail("read online CPUs: %v", err)
		}
		got, ok := countCPUs(s)
		if !ok {
			return fail("cannot parse online CPUs %q", s)
		}
		if got != want {
			return fail("%d CPUs online, want %d", got, want)
		}
		return pass()
	}
}

func tcpCheck(addr string) func(context.Context, *env) outcome {
	return func(ctx context.Context, _ *env) outcome {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			if ctx.Err() != nil {
				return outcome{reason: fmt.Sprintf("connect %s: timed out", addr), timedOut: true}
			}
			return fail("connect %s: %v", addr, errorTail(err))
		}
		c.Close()
		return pass()
	}
}

// errorTail keeps the last part of a net error ("connection refused").
func errorTail(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
