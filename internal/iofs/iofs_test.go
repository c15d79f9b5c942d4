package iofs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/duration"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// needFUSE skips (or fails under VIGIL_REQUIRE_E2E=1) without root and a
// usable /dev/fuse.
func needFUSE(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.MissingPeer(t, "iofs tests mount FUSE: need root")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		testutil.MissingPeer(t, "no usable /dev/fuse: %v", err)
	}
	f.Close()
}

type mounted struct {
	*FS
	src, mnt string
	done     chan error
	cancel   context.CancelFunc
}

// mountT mounts a fresh source directory, reporting to socket every 100ms.
func mountT(t testing.TB, socket string) *mounted {
	t.Helper()
	return mountCfg(t, socket, nil)
}

// mountCfg is mountT with the config adjusted by edit.
func mountCfg(t testing.TB, socket string, edit func(*Config)) *mounted {
	t.Helper()
	needFUSE(t)
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Source, cfg.Mountpoint, cfg.Socket = src, mnt, socket
	cfg.Interval = duration.Duration(100 * time.Millisecond)
	if edit != nil {
		edit(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fsys, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &mounted{FS: fsys, src: src, mnt: mnt, done: make(chan error, 1), cancel: cancel}
	go func() { m.done <- fsys.Run(ctx) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop unmounts and waits for Run to end; it is idempotent.
func (m *mounted) stop(t testing.TB) {
	t.Helper()
	m.cancel()
	if m.done == nil {
		return
	}
	select {
	case err := <-m.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return 15s after stop")
	}
	m.done = nil
	if isMounted(t, m.mnt) {
		t.Errorf("%s still mounted after stop", m.mnt)
	}
}

func isMounted(t testing.TB, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte(" "+dir+" "))
}

func pid() uint32 { return uint32(os.Getpid()) }

// TestReadWriteCounts writes and reads a file through the mount from this
// process (its goroutines run on many threads: FUSE reports thread ids,
// which must come back as our pid) and checks every counter it can know
// exactly, as the fake sampler receives them.
func TestReadWriteCounts(t *testing.T) {
	s := newSampler(t)
	m := mountT(t, s.path)
	p := filepath.Join(m.mnt, "data")

	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	blk := bytes.Repeat([]byte("v"), 4096)
	for range 10 {
		if _, err := f.Write(blk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Write(blk[:100]); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f, err = os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for range 3 {
		if n, err := f.Read(buf); err != nil || n != 4096 {
			t.Fatalf("read: %d, %v", n, err)
		}
	}
	if n, err := f.ReadAt(buf[:50], 100); err != nil || n != 50 {
		t.Fatalf("pread: %d, %v", n, err)
	}
	// A 2 MiB pread of the 41060-byte file: short, then a 0-byte read at EOF.
	big := make([]byte, 2<<20)
	if n, err := f.ReadAt(big, 0); err != io.EOF || n != 41060 {
		t.Fatalf("2 MiB pread: %d, %v", n, err)
	}
	f.Close()
	if b, err := os.ReadFile(filepath.Join(m.src, "data")); err != nil || len(b) != 41060 {
		t.Fatalf("source has %d bytes, %v", len(b), err)
	}

	c := s.wait(p, pid(), "closes", func(c Counters) bool { return c[cCloses] == 2 })
	want := map[int]uint64{
		cOpens: 2, cCloses: 2, cWrites: 11, cBytesWritten: 41060, cSyncs: 1,
		// ReadAt's short read is followed by one at EOF that returns 0.
		cReads: 6, cBytesRead: 3*4096 + 50 + 41060,
		cWriteHist + 2: 10, cWriteHist + 0: 1, // 4096 in (1K,10K], 100 in [0,100]
		cReadHist + 2: 3, cReadHist + 0: 2, cReadHist + 3: 1, // 50 and 0 in [0,100], 41060 in (10K,100K]
		// writes: 10 continue the previous one; reads: 2 do, the two
		// preads jump back, the read at EOF continues the short one (the
		// first access of each handle is neither).
		cSeq: 13, cRandom: 2,
	}
	for i, w := range want {
		if c[i] != w {
			t.Errorf("counter %d = %d, want %d (all: %v)", i, c[i], w, c)
		}
	}
	if c[cReadNs] == 0 || c[cWriteNs] == 0 || c[cMetaNs] == 0 {
		t.Errorf("times not counted: read %d write %d meta %d ns", c[cReadNs], c[cWriteNs], c[cMetaNs])
	}
	if c[cMmaps] != 0 {
		t.Errorf("mmaps = %d: FUSE cannot see them", c[cMmaps])
	}

	// The 2 MiB read went as requests of at most maxRequest: check the
	// count against a file larger than a request.
	if err := os.WriteFile(filepath.Join(m.src, "big"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(filepath.Join(m.mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.ReadFull(f, big); err != nil || n != len(big) {
		t.Fatalf("read big: %d, %v", n, err)
	}
	f.Close()
	c = s.wait(filepath.Join(m.mnt, "big"), pid(), "big reads", func(c Counters) bool { return c[cCloses] == 1 })
	// Requests are cut at maxRequest (just under 1 MiB): two full ones
	// and the 16 KiB rest.
	wantReads := (2<<20 + maxRequest - 1) / maxRequest
	if c[cReads] != uint64(wantReads) || c[cBytesRead] != 2<<20 || c[cReadHist+4] != 2 {
		t.Errorf("2 MiB read: %d reads of %d bytes, hist(100K,1M] %d; want %d, 2 of them in (100K,1M]", c[cReads], c[cBytesRead], c[cReadHist+4], wantReads)
	}

	s.mu.Lock()
	h := s.hellos
	s.mu.Unlock()
	if len(h) != 1 || h[0].client != "vigil iofs" || h[0].rank != -1 || h[0].intervalMs != 100 {
		t.Errorf("HELLO: %+v", h)
	}
	m.stop(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		byes := s.byes
		s.mu.Unlock()
		if byes == 1 {
			break
		}
		if byes > 1 || time.Now().After(deadline) {
			t.Fatalf("%d BYE messages after stop, want 1", byes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.check()
}

// TestMmapPageIns maps a file through the mount in a child process and
// reads every page: the page-ins arrive as reads of the child's pid, each
// byte once per mapping (a new mapping of a direct I/O file drops the
// cached pages, so the second mapping is read again rather than hidden by
// the page cache).
func TestMmapPageIns(t *testing.T) {
	s := newSampler(t)
	m := mountT(t, s.path)
	const size = 64*4096 + 100 // a partial last page
	data := make([]byte, size)
	rand.Read(data)
	ref := filepath.Join(m.src, "mapped")
	if err := os.WriteFile(ref, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(m.mnt, "mapped")
	child := runMmapChild(t, 2, p, ref)
	c := s.wait(p, child, "page-ins", func(c Counters) bool { return c[cCloses] >= 1 && c[cBytesRead] >= 2*size })
	if c[cBytesRead] != 2*size {
		t.Errorf("bytes read by page-ins = %d, want %d (each page once per mapping)", c[cBytesRead], 2*size)
	}
	if c[cReads] < 2 || c[cOpens] != 1 {
		t.Errorf("reads = %d (want at least one per mapping), opens = %d", c[cReads], c[cOpens])
	}
	if got := s.get(p, pid()); got != (Counters{}) {
		t.Errorf("the child's page-ins counted for the test's pid: %v", got)
	}
	s.check()
}

// TestMmapWriteback: a child writes a shared mapping and msyncs it; the
// writeback, sent by the kernel, counts for the child (the caller, or the
// process that opened the file when a kernel thread sends it).
func TestMmapWriteback(t *testing.T) {
	s := newSampler(t)
	m := mountT(t, s.path)
	const size = 16 * 4096
	src := filepath.Join(m.src, "shared")
	if err := os.WriteFile(src, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(m.mnt, "shared")
	child := runMmapChild(t, -1, p, "")
	c := s.wait(p, child, "writeback", func(c Counters) bool { return c[cBytesWritten] >= size })
	if c[cBytesWritten] != size {
		t.Errorf("writeback of the mapping: %d bytes, want %d", c[cBytesWritten], size)
	}
	b, err := os.ReadFile(src)
	if err != nil || len(b) != size || b[size-1] != byte((size-1)%251) {
		t.Errorf("source after writeback: %d bytes, %v", len(b), err)
	}
	s.mu.Lock()
	for k, v := range s.sums {
		if k.path == p && k.pid != child {
			t.Errorf("I/O of the mapping counted for pid %d, not the child %d: %v", k.pid, child, *v)
		}
	}
	s.mu.Unlock()
	s.check()
}

// fio runs fio with --thread (its jobs are threads of its own process) and
// returns its pid and the bytes it reports for kind ("read" or "write").
func fio(t *testing.T, kind string, args ...string) (uint32, uint64) {
	t.Helper()
	bin := testutil.LookPeer(t, "fio", "apt-get install fio")
	cmd := exec.Command(bin, append([]string{"--thread", "--output-format=json", "--name=job"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("fio %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	var res struct {
		Jobs []map[string]json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("fio output: %v\n%s", err, out.String())
	}
	var io struct {
		Bytes uint64 `json:"io_bytes"`
	}
	if err := json.Unmarshal(res.Jobs[0][kind], &io); err != nil {
		t.Fatal(err)
	}
	return uint32(cmd.Process.Pid), io.Bytes
}

// TestFio runs fio's psync and mmap engines against the mount: the bytes
// counted for fio's pid match what fio reports.
func TestFio(t *testing.T) {
	s := newSampler(t)
	m := mountT(t, s.path)
	const size = 4 << 20
	if err := os.WriteFile(filepath.Join(m.src, "in"), make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(m.mnt, "in")

	// psync reads and writes: one request per 64 KiB call.
	pr, nr := fio(t, "read", "--ioengine=psync", "--rw=read", "--bs=64k", "--size=4m", "--filename="+in)
	out := filepath.Join(m.mnt, "out")
	pw, nw := fio(t, "write", "--ioengine=psync", "--rw=write", "--bs=64k", "--size=4m", "--filename="+out)
	if nr != size || nw != size {
		t.Fatalf("fio moved %d and %d bytes, want %d", nr, nw, size)
	}
	c := s.wait(in, pr, "fio psync read", func(c Counters) bool { return c[cBytesRead] >= nr })
	if c[cBytesRead] != nr || c[cReads] != nr/65536 || c[cReadHist+3] != nr/65536 {
		t.Errorf("fio psync read %d bytes: counted %d bytes in %d reads (%d in [10K,100K))", nr, c[cBytesRead], c[cReads], c[cReadHist+3])
	}
	c = s.wait(out, pw, "fio psync write", func(c Counters) bool { return c[cBytesWritten] >= nw })
	// fio may lay the file out first (more writes); at least its own.
	if c[cBytesWritten] < nw || c[cWrites] < nw/65536 {
		t.Errorf("fio psync wrote %d bytes: counted %d bytes in %d writes", nw, c[cBytesWritten], c[cWrites])
	}

	// mmap reads: page-ins of fio's mapping, each page once.
	pm, nm := fio(t, "read", "--ioengine=mmap", "--rw=read", "--bs=64k", "--size=4m", "--filename="+in)
	if nm != size {
		t.Fatalf("fio mmap read %d bytes, want %d", nm, size)
	}
	c = s.wait(in, pm, "fio mmap read", func(c Counters) bool { return c[cBytesRead] >= nm })
	if c[cBytesRead] != nm {
		t.Errorf("fio mmap read %d bytes: page-ins counted %d bytes in %d reads", nm, c[cBytesRead], c[cReads])
	}
	if c[cReads] >= nm/4096 {
		t.Logf("page-ins came one page at a time: %d reads", c[cReads])
	}
	s.check()
}

// TestSamplerRestart: when the sampler goes away and comes back on the same
// socket, the later intervals reach the new one (with a new HELLO and FILEs).
func TestSamplerRestart(t *testing.T) {
	s1 := newSampler(t)
	m := mountT(t, s1.path)
	p := filepath.Join(m.mnt, "f")
	if err := os.WriteFile(p, []byte("first"), 0o644); err != nil {
		t.Fatal(err)
	}
	s1.wait(p, pid(), "before the restart", func(c Counters) bool { return c[cBytesWritten] == 5 })
	s1.close()
	os.Remove(s1.path)
	s2 := newSamplerAt(t, s1.path)
	// The first interval after the restart finds the old connection dead
	// (dropped); the next ones go to the new sampler.
	deadline := time.Now().Add(10 * time.Second)
	for s2.get(p, pid())[cBytesWritten] == 0 {
		if err := os.WriteFile(p, []byte("second"), 0o644); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing reached the restarted sampler in 10s (stats: %d connects, %d send errors)",
				m.Stats().Connects.Load(), m.Stats().SendErrors.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := m.Stats().Connects.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	s2.check()
}

// TestNoSampler: with nobody listening the file system works and the
// intervals are dropped and counted, never waited for.
func TestNoSampler(t *testing.T) {
	m := mountT(t, filepath.Join(t.TempDir(), "nobody.sock"))
	p := filepath.Join(m.mnt, "f")
	deadline := time.Now().Add(10 * time.Second)
	for m.Stats().Dropped.Load() < 2 {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("intervals dropped: %d after 10s", m.Stats().Dropped.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := m.Stats().Connects.Load(); n != 0 {
		t.Errorf("%d connections to a missing socket", n)
	}
}

// TestExternalUnmount: fusermount3 -u ends Run without error.
func TestExternalUnmount(t *testing.T) {
	fm := testutil.LookPeer(t, "fusermount3", "apt-get install fuse3")
	m := mountT(t, filepath.Join(t.TempDir(), "nobody.sock"))
	if out, err := exec.Command(fm, "-u", m.mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	select {
	case err := <-m.done:
		if err != nil {
			t.Errorf("Run after an external unmount: %v", err)
		}
		m.done = nil
	case <-time.After(10 * time.Second):
		t.Fatal("Run still serving 10s after fusermount3 -u")
	}
}

// TestStopWithOpenFile: stopping while a file is open still unmounts (lazily
// once the retries run out).
func TestStopWithOpenFile(t *testing.T) {
	m := mountT(t, filepath.Join(t.TempDir(), "nobody.sock"))
	f, err := os.Create(filepath.Join(m.mnt, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	m.stop(t)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stop took %s", d)
	}
	fmt.Fprintln(io.Discard, f.Name())
}
