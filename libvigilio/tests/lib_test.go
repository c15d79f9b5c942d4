package libvigiliotest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// fast makes the reporter send every 100 ms so intervals arrive within a test.
var fast = []string{"VIGIL_IO_INTERVAL_MS=100"}

func TestDD(t *testing.T) {
	l := listen(t)
	out := filepath.Join(t.TempDir(), "x")
	start := time.Now()
	l.run(t, []string{"SLURM_JOB_ID=4242", "SLURM_PROCID=3"}, "dd", "if=/dev/zero", "of="+out, "bs=1k", "count=100000", "status=none")
	wall := uint64(time.Since(start))
	s := l.waitBye(t, 1)
	c := s.file(out, 0)
	eq(t, "writes", c[cWrites], 100000)
	eq(t, "bytes_written", c[cBytesWritten], 102400000)
	eq(t, "write histogram (100,1K]", c[cWHist+1], 100000)
	eq(t, "opens", c[cOpens], 1)
	eq(t, "reads", c[cReads], 0)
	eq(t, "sequential", c[cSeq], 99999)
	eq(t, "random", c[cRandom], 0)
	// Sampled and converted from TSC ticks: the writes are most of dd's time, never more than all of it.
	if c[cWriteNS] < wall/20 || c[cWriteNS] > wall {
		t.Errorf("write_ns = %d for a run of %d ns", c[cWriteNS], wall)
	}
	if s.file("/dev/zero", 0) != (counters{}) {
		t.Error("/dev/zero is excluded by default but was counted")
	}
	if s[0].job != "4242" || s[0].rank != 3 || s[0].client != "libvigilio 0.1" || !strings.HasSuffix(s[0].exe, "/dd") ||
		s[0].interval != 1000 {
		t.Errorf("HELLO = rank %d interval %d exe %q job %q client %q", s[0].rank, s[0].interval, s[0].exe, s[0].job, s[0].client)
	}
	if s[0].pid == 0 {
		t.Error("no SO_PEERCRED pid")
	}
}

func TestCpTar(t *testing.T) {
	l := listen(t)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := strings.Repeat("vigil", 200000) // 1,000,000 bytes
	if err := os.WriteFile(src, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "small"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.run(t, nil, "cp", src, dst)
	s := l.waitBye(t, 1)
	eq(t, "cp: bytes read from src", s.file(src, 0)[cBytesRead], 1000000)
	eq(t, "cp: bytes written to dst", s.file(dst, 0)[cBytesWritten], 1000000)

	tarball := filepath.Join(t.TempDir(), "a.tar")
	l.run(t, nil, "tar", "-cf", tarball, "-C", dir, "src", "small")
	s = l.waitBye(t, 2)
	st, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	tarPID := s[1].pid
	eq(t, "tar: bytes read from src", s.file(src, tarPID)[cBytesRead], 1000000)
	eq(t, "tar: bytes read from small", s.file(filepath.Join(dir, "small"), tarPID)[cBytesRead], 6)
	eq(t, "tar: bytes written to the archive", s.file(tarball, tarPID)[cBytesWritten], uint64(st.Size()))
}

func TestPython(t *testing.T) {
	py := testutil.LookPeer(t, "python3", "apt-get install python3")
	l := listen(t)
	p := filepath.Join(t.TempDir(), "py.bin")
	script := fmt.Sprintf(`
p = %q
with open(p, "wb") as f:
    for i in range(10):
        f.write(b"x" * 100000)
with open(p, "rb", buffering=0) as f:
    assert len(f.read()) == 1000000
`, p)
	l.run(t, nil, py, "-c", script)
	// python3 may be a wrapper script (pyenv): wait for the interpreter's counts, not the first BYE.
	c := l.waitFile(t, p, func(c counters) bool { return c[cCloses] >= 2 })
	eq(t, "bytes_written", c[cBytesWritten], 1000000)
	eq(t, "bytes_read", c[cBytesRead], 1000000)
	eq(t, "opens", c[cOpens], 2)
	eq(t, "closes", c[cCloses], 2)
}

func TestStdio(t *testing.T) {
	l := listen(t)
	p := filepath.Join(t.TempDir(), "stdio.txt")
	l.run(t, nil, progsPath(t), "stdio", p)
	c := l.waitBye(t, 1).file(p, 0)
	eq(t, "opens", c[cOpens], 2)
	eq(t, "closes", c[cCloses], 2)
	eq(t, "writes (3 fwrite, fprintf, fputs)", c[cWrites], 5)
	eq(t, "bytes_written", c[cBytesWritten], 3000+8+5)
	eq(t, "reads (fread, fgets)", c[cReads], 2)
	eq(t, "bytes_read", c[cBytesRead], 3008)
	eq(t, "seeks", c[cSeeks], 1)
}

func progsPath(t *testing.T) string {
	build(t)
	return progs
}

func TestThreads(t *testing.T) {
	// 80 threads: more than the 64 per-thread blocks, so some share the atomic one.
	for _, n := range []int{8, 80} {
		l := listen(t)
		p := filepath.Join(t.TempDir(), "mt")
		l.run(t, fast, progsPath(t), "threads", p, fmt.Sprint(n), "2000")
		c := l.waitBye(t, 1).file(p, 0)
		eq(t, fmt.Sprintf("%d threads: writes", n), c[cWrites], uint64(n)*2000)
		eq(t, fmt.Sprintf("%d threads: bytes_written", n), c[cBytesWritten], uint64(n)*2000*100)
		eq(t, fmt.Sprintf("%d threads: histogram [0,100]", n), c[cWHist+0], uint64(n)*2000)
	}
}

func TestForkExec(t *testing.T) {
	l := listen(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	cmd := l.command(t, fast, progsPath(t), "fork", a, b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fork: %v\n%s", err, out)
	}
	parent := int32(cmd.Process.Pid)
	s := l.waitBye(t, 2)
	pa, pb := s.file(a, parent), s.file(b, parent)
	eq(t, "parent: writes to a", pa[cWrites], 15)
	eq(t, "parent: bytes to a", pa[cBytesWritten], 1500)
	eq(t, "parent: writes to b", pb[cWrites], 0)
	var child int32
	for _, c := range s {
		if c.pid != parent {
			child = c.pid
		}
	}
	ca, cb := s.file(a, child), s.file(b, child)
	eq(t, "child: writes to a", ca[cWrites], 3)
	eq(t, "child: bytes to a", ca[cBytesWritten], 30)
	eq(t, "child: opens of a (inherited)", ca[cOpens], 0)
	eq(t, "child: writes to b", cb[cWrites], 7)
	eq(t, "child: bytes to b", cb[cBytesWritten], 350)

	// exec: what was counted before execl is flushed; dd then reports on its own connection.
	l = listen(t)
	x, y := filepath.Join(dir, "x"), filepath.Join(dir, "y")
	l.run(t, nil, progsPath(t), "exec", x, y)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s = l.snap(t)
		if s.file(y, 0)[cWrites] == 3 && s.file(x, 0)[cWrites] == 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	eq(t, "before exec: writes to x", s.file(x, 0)[cWrites], 4)
	eq(t, "before exec: bytes to x", s.file(x, 0)[cBytesWritten], 400)
	eq(t, "after exec: bytes to y", s.file(y, 0)[cBytesWritten], 3072)
}

func TestKilled(t *testing.T) {
	l := listen(t)
	p := filepath.Join(t.TempDir(), "spin")
	cmd := l.command(t, fast, progsPath(t), "spin", p)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("spin said %q", line)
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.intervals(t) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 intervals in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := l.snap(t).file(p, 0)[cWrites]
	cmd.Process.Signal(syscall.SIGKILL)
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("spin ended with %v, want SIGKILL", err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for !l.snap(t)[0].closed && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	s := l.snap(t)
	if !s[0].closed || s[0].bye {
		t.Errorf("after SIGKILL: closed %v bye %v, want closed without BYE", s[0].closed, s[0].bye)
	}
	if got := s.file(p, 0)[cWrites]; before == 0 || got < before {
		t.Errorf("writes before the kill %d, kept %d", before, got)
	}
}

// TestSamplerRestart stops the sampler under a running program and starts
// it again on the same socket: the program reconnects (within its 10 s
// retry) and its first interval then carries what it wrote meanwhile, so
// the two samplers together see about every write it made.
func TestSamplerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the library's 10 s reconnect")
	}
	l1 := listen(t)
	p := filepath.Join(t.TempDir(), "spin")
	cmd := l1.command(t, fast, progsPath(t), "spin", p)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("spin said %q", line)
	}
	started := time.Now()
	for deadline := time.Now().Add(10 * time.Second); l1.intervals(t) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 3 intervals in 10 s")
		}
	}
	l1.stop()
	before := l1.snap(t).file(p, 0)[cWrites]
	time.Sleep(time.Second) // the program finds the sampler gone
	l2 := listenAt(t, l1.path)
	var after uint64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s := l2.snap(t); len(s) > 0 && s[0].intervals >= 2 {
			after = s.file(p, 0)[cWrites]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no intervals from the program 20 s after the sampler came back")
		}
	}
	elapsed := time.Since(started)
	if pid := l2.snap(t)[0].pid; pid != int32(cmd.Process.Pid) {
		t.Fatalf("the second sampler's connection is pid %d, want %d", pid, cmd.Process.Pid)
	}
	// spin writes once a millisecond (a little less often on a busy machine):
	// without the counts of the outage the total would be under a quarter of
	// that, as the outage is most of the run.
	if total, floor := before+after, uint64(elapsed.Milliseconds()/2); total < floor {
		t.Fatalf("writes seen: %d before the restart + %d after = %d in %v; want at least %d (the outage's writes lost?)",
			before, after, total, elapsed.Round(time.Millisecond), floor)
	}
	t.Logf("writes seen: %d before the restart, %d after, in %v", before, after, elapsed.Round(time.Millisecond))
}

func (l *listener) intervals(t *testing.T) int {
	n := 0
	for _, c := range l.snap(t) {
		n += c.intervals
	}
	return n
}

func TestNoSampler(t *testing.T) {
	build(t)
	dir := t.TempDir()
	for _, sock := range []string{filepath.Join(dir, "absent.sock"), dir, "/dev/null/x"} {
		start := time.Now()
		cmd := exec.Command("sh", "-c", `dd if=/dev/zero of="$1" bs=1k count=1000 status=none && exit 3`, "sh",
			filepath.Join(dir, "out"))
		cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "VIGIL_APPIO_SOCKET="+sock)
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("socket %s: exit %v, want status 3", sock, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("socket %s: took %v", sock, d)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "out"))
	if err != nil || st.Size() != 1024000 {
		t.Errorf("output file: %v %v", st, err)
	}
}

func TestErrno(t *testing.T) {
	l := listen(t)
	l.run(t, nil, progsPath(t), "errno", t.TempDir())
}

func TestFold(t *testing.T) {
	l := listen(t)
	// tmpfs (counted by default): creating 5,000 files on a busy disk takes seconds.
	dir, err := os.MkdirTemp("/dev/shm", "vigilio-fold")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	l.run(t, nil, progsPath(t), "fold", dir, "5000")
	s := l.waitBye(t, 1)
	if n := len(s[0].files); n != 4095 {
		t.Errorf("%d FILE messages, want 4095 (the table holds 4,096 slots, 0 is other files)", n)
	}
	other := s[0].totals[0]
	if other == nil {
		t.Fatal("no record for other files (id 0)")
	}
	eq(t, "other files: opens", other[cOpens], 5000-4095)
	eq(t, "other files: writes", other[cWrites], 5000-4095)
	var writes uint64
	for _, c := range s[0].totals {
		writes += c[cWrites]
	}
	eq(t, "writes over all records", writes, 5000)
}

func TestCloseAll(t *testing.T) {
	l := listen(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	// Timing every call makes every call check for the interval's end in this single-threaded program.
	l.run(t, append(fast, "VIGIL_IO_TIME_SAMPLE=1"), progsPath(t), "closeall", a, b)
	s := l.waitBye(t, 1)
	eq(t, "writes to a", s.file(a, 0)[cWrites], 3)
	eq(t, "writes to b", s.file(b, 0)[cWrites], 6)
	if len(s) < 2 {
		t.Errorf("%d connections, want a second one after closefrom closed the first", len(s))
	}
}

func TestDisabledAndExcluded(t *testing.T) {
	l := listen(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	l.run(t, []string{"VIGIL_IO_EXCLUDE=" + dir}, "dd", "if=/dev/zero", "of="+p, "bs=1k", "count=10", "status=none")
	l.run(t, []string{"VIGIL_IO_DISABLE=1"}, "dd", "if=/dev/zero", "of="+p, "bs=1k", "count=10", "status=none")
	// /dev/zero is excluded by default; included on request.
	l.run(t, []string{"VIGIL_IO_INCLUDE=/dev/zero"}, "dd", "if=/dev/zero", "of=/dev/null", "bs=1k", "count=10",
		"status=none")
	s := l.waitBye(t, 1)
	if len(s) != 1 {
		t.Fatalf("%d connections, want 1 (excluded and disabled runs send nothing)", len(s))
	}
	eq(t, "reads of /dev/zero", s.file("/dev/zero", 0)[cReads], 10)
	eq(t, "writes to the excluded file", s.file(p, 0)[cWrites], 0)
}

// TestCalls checks each call of the list that Darshan does not wrap
// (openat2 through syscall(), close_range, copy_file_range, sendfile, statx,
// fstatat, preadv2/pwritev2) and the rarer ones it does (dup3, fcntl
// F_DUPFD*, mmap/msync/munmap, rename, unlink, fprintf/vfprintf/fputs/fgets,
// the fseek family), one file each, with exact counts.
func TestCalls(t *testing.T) {
	l := listen(t)
	dir := t.TempDir()
	l.run(t, nil, progsPath(t), "calls", dir)
	s := l.waitBye(t, 1)
	type want struct {
		file string
		what string
		idx  int
		n    uint64
	}
	for _, w := range []want{
		{"openat2", "opens", cOpens, 1}, {"openat2", "writes", cWrites, 1}, {"openat2", "bytes_written", cBytesWritten, 10},
		{"openat2", "closes", cCloses, 1},
		// The write after close_range fails with EBADF and must not count for cr_a.
		{"cr_a", "writes", cWrites, 1}, {"cr_a", "bytes_written", cBytesWritten, 5}, {"cr_a", "closes", cCloses, 1},
		{"cr_b", "opens", cOpens, 1}, {"cr_b", "bytes_written", cBytesWritten, 7}, {"cr_b", "closes (syscall close_range)", cCloses, 1},
		{"cr_c", "bytes_written", cBytesWritten, 9}, {"cr_c", "closes (syscall close)", cCloses, 1},
		{"cr_d", "writes", cWrites, 1}, {"cr_d", "bytes_written", cBytesWritten, 11}, {"cr_d", "closes", cCloses, 1},
		{"src", "reads (copy_file_range, sendfile)", cReads, 2}, {"src", "bytes_read", cBytesRead, 4096 + 3000},
		{"src", "writes", cWrites, 1},
		{"cfr", "writes", cWrites, 1}, {"cfr", "bytes_written", cBytesWritten, 4096},
		{"sendfile", "writes", cWrites, 1}, {"sendfile", "bytes_written", cBytesWritten, 3000},
		{"v2", "writes (pwritev2, via dup3, F_DUPFD, F_DUPFD_CLOEXEC)", cWrites, 4}, {"v2", "bytes_written", cBytesWritten, 306},
		{"v2", "reads (preadv2)", cReads, 1}, {"v2", "bytes_read", cBytesRead, 300},
		{"v2", "stats (stat, lstat, fstat, 2 fstatat, 2 statx)", cStats, 7},
		{"v2", "meta_other (dup3, 2 F_DUPFD, F_GETFL)", cMetaOther, 4}, {"v2", "closes (4 fds)", cCloses, 4},
		{"v2", "opens", cOpens, 1},
		{"mmap", "mmaps", cMmaps, 1}, {"mmap", "meta_other (msync, munmap)", cMetaOther, 2}, {"mmap", "closes", cCloses, 1},
		{"old", "meta_other (rename)", cMetaOther, 1}, {"new", "meta_other (unlink)", cMetaOther, 1},
		{"stdio", "writes (fprintf, vfprintf, fputs)", cWrites, 3}, {"stdio", "bytes_written", cBytesWritten, 13},
		{"stdio", "reads (2 fgets)", cReads, 2}, {"stdio", "bytes_read", cBytesRead, 12},
		{"stdio", "seeks (fseek, fseeko, fseeko64, fsetpos, fsetpos64, rewind)", cSeeks, 6}, {"stdio", "opens", cOpens, 1}, {"stdio", "closes", cCloses, 1},
	} {
		eq(t, w.file+": "+w.what, s.file(filepath.Join(dir, w.file), 0)[w.idx], w.n)
	}
}

// fio runs Debian's fio with one job of 1 MiB in 64 KiB blocks on file.
func (l *listener) fio(t *testing.T, bin, file, engine, rw string) {
	t.Helper()
	l.run(t, fast, bin, "--name=t", "--filename="+file, "--rw="+rw, "--bs=64k", "--size=1m",
		"--ioengine="+engine, "--output=/dev/null")
}

// TestFio: fio's psync engine writes and reads with pwrite and pread (its
// job runs in a forked process); the mmap engine lays the file out with
// write and then maps it, which the library sees as one mmap (the page
// traffic itself is vigil iofs's to see).
func TestFio(t *testing.T) {
	fio := testutil.LookPeer(t, "fio", "apt-get install fio")
	dir := t.TempDir()

	l := listen(t)
	p := filepath.Join(dir, "psync")
	l.fio(t, fio, p, "psync", "write")
	c := l.waitFile(t, p, func(c counters) bool { return c[cWrites] >= 16 && c[cCloses] >= 1 })
	eq(t, "psync write: writes", c[cWrites], 16)
	eq(t, "psync write: bytes_written", c[cBytesWritten], 1<<20)
	eq(t, "psync write: writes of (10K,100K]", c[cWHist+3], 16)
	eq(t, "psync write: sequential", c[cSeq], 15)
	eq(t, "psync write: reads", c[cReads], 0)

	l = listen(t)
	l.fio(t, fio, p, "psync", "read")
	c = l.waitFile(t, p, func(c counters) bool { return c[cReads] >= 16 && c[cCloses] >= 1 })
	eq(t, "psync read: reads", c[cReads], 16)
	eq(t, "psync read: bytes_read", c[cBytesRead], 1<<20)
	eq(t, "psync read: reads of (10K,100K]", c[cRHist+3], 16)
	eq(t, "psync read: writes (the file was laid out already)", c[cWrites], 0)

	l = listen(t)
	m := filepath.Join(dir, "mmap")
	l.fio(t, fio, m, "mmap", "write")
	c = l.waitFile(t, m, func(c counters) bool { return c[cWrites] >= 16 && c[cMmaps] >= 1 })
	eq(t, "mmap write: layout writes", c[cWrites], 16)
	eq(t, "mmap write: layout bytes", c[cBytesWritten], 1<<20)
	eq(t, "mmap write: mmaps", c[cMmaps], 1)
	eq(t, "mmap write: opens (layout, job)", c[cOpens], 2)
}

// TestUnderscoreExit: a forked child that ends in _exit (no destructor)
// still reports its last interval; a vforked child's exec and _exit, on the
// parent's memory, neither flush nor end the parent's reporting.
func TestUnderscoreExit(t *testing.T) {
	l := listen(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	cmd := l.command(t, nil, progsPath(t), "fexit", a, b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fexit: %v\n%s", err, out)
	}
	parent := int32(cmd.Process.Pid)
	s := l.waitBye(t, 2)
	if len(s) != 2 {
		t.Errorf("%d connections, want 2 (parent, forked child; the vforked one shares the parent's)", len(s))
	}
	eq(t, "parent: writes to a", s.file(a, parent)[cWrites], 3)
	eq(t, "parent: bytes to a", s.file(a, parent)[cBytesWritten], 300)
	var child int32
	for _, c := range s {
		if c.pid != parent {
			child = c.pid
		}
	}
	eq(t, "child: writes to a", s.file(a, child)[cWrites], 3)
	eq(t, "child: writes to b", s.file(b, child)[cWrites], 4)
	eq(t, "child: bytes to b", s.file(b, child)[cBytesWritten], 40)
}
