package iofs

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSizeBucket(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want int
	}{
		{0, 0}, {100, 0}, {101, 1}, {1024, 1}, {1025, 2}, {10240, 2}, {10241, 3}, {65536, 3},
		{102400, 3}, {102401, 4}, {1 << 20, 4}, {1<<20 + 1, 5}, {4 << 20, 5}, {4<<20 + 1, 6},
		{10 << 20, 6}, {100 << 20, 7}, {1 << 30, 8}, {1<<30 + 1, 9}, {1 << 40, 9},
	} {
		if got := sizeBucket(c.n); got != c.want {
			t.Errorf("sizeBucket(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestTableBounds: beyond MaxPairs pairs the counts fold into file 0 per
// pid, beyond a few more pids into (0, 0); beyond MaxFiles paths new
// files fold; nothing is lost from the totals.
func TestTableBounds(t *testing.T) {
	tb := NewTable(Limits{MaxFiles: 8, MaxPairs: 4})
	var ops uint64
	for i := range 10 { // 10 files, 2 pids each: 20 pairs
		for pid := uint32(1); pid <= 2; pid++ {
			tb.opPath(fmt.Sprintf("/m/f%d", i), pid, cStats, 5)
			ops++
		}
	}
	for pid := uint32(100); pid < 100+2*foldPids; pid++ { // many pids folded
		tb.opPath("/m/f0", pid, cStats, 1)
		ops++
	}
	recs, folded := tb.Flush(nil)
	var total uint64
	perPath := map[string]int{}
	for _, r := range recs {
		total += r.C[cStats]
		perPath[r.Path]++
	}
	if total != ops {
		t.Errorf("stats counted %d, want %d", total, ops)
	}
	if len(recs) > 4+foldPids+1 {
		t.Errorf("%d records, bound is %d", len(recs), 4+foldPids+1)
	}
	if perPath[""] == 0 || folded == 0 {
		t.Errorf("nothing folded: %v, folded %d", perPath, folded)
	}
	if len(tb.files) > 8 {
		t.Errorf("%d files known, bound 8", len(tb.files))
	}

	// Idle files without handles are forgotten; held ones stay.
	tb.Flush(nil)
	if len(tb.files) != 0 {
		t.Errorf("%d idle files still known after an interval without use", len(tb.files))
	}
	h := &handle{f: tb.acquire("/m/held"), lastEnd: -1}
	tb.access(h, 1, false, 0, 10, 1)
	tb.Flush(nil)
	tb.Flush(nil)
	if len(tb.files) != 1 || tb.files["/m/held"] == nil {
		t.Errorf("after idle intervals: %d files known, want only the held one", len(tb.files))
	}
	tb.release(h.f)
	tb.Flush(nil)
	if len(tb.files) != 0 {
		t.Errorf("released file still known")
	}
}

func TestStatusField(t *testing.T) {
	b := []byte("Name:\tx\nUmask:\t0022\nState:\tS\nTgid:\t4242\nNgid:\t0\nPid:\t4250\nPPid:\t2\n")
	if v := statusField(b, "\nTgid:"); v != 4242 {
		t.Errorf("Tgid %d", v)
	}
	if v := statusField(b, "\nPPid:"); v != 2 {
		t.Errorf("PPid %d", v)
	}
	if v := statusField(b, "\nNope:"); v != 0 {
		t.Errorf("missing field %d", v)
	}
	if v := statusField([]byte("\nTgid:\t99999999999"), "\nTgid:"); v != 0 {
		t.Errorf("overflow gives %d", v)
	}
}

// TestPidsResolve: a thread id of this process resolves to our pid, the
// kernel thread kthreadd (2) and a missing id to 0.
func TestPidsResolve(t *testing.T) {
	p := newPids("/proc", 16)
	if got := p.resolve(uint32(os.Getpid())); got != uint32(os.Getpid()) {
		t.Errorf("our pid resolves to %d", got)
	}
	if got := p.resolve(2); got != 0 {
		t.Errorf("kthreadd resolves to %d, want 0", got)
	}
	if got := p.resolve(1 << 30); got != 0 {
		t.Errorf("missing id resolves to %d", got)
	}
	for i := range uint32(40) {
		p.resolve(1<<30 + i)
	}
	if len(p.m) > 16 {
		t.Errorf("cache holds %d ids, bound 16", len(p.m))
	}
}

// TestReporterSplitsAndReconnects: an interval of more records than fit in
// 64 KiB goes as several INTERVAL messages with the same bounds, each file
// announced once; a sampler that comes later gets a new HELLO and FILEs.
func TestReporterSplitsAndReconnects(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "later.sock")
	var st ReportStats
	r := newReporter(sock, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), &st)
	go r.run()
	start := time.Unix(1700000000, 0)
	mk := func(n int) batch {
		b := batch{start: start, end: start.Add(time.Second)}
		for i := range n {
			rec := Record{Path: fmt.Sprintf("/m/f%d", i), Pid: 7}
			rec.C[cReads] = uint64(i + 1)
			b.recs = append(b.recs, rec)
		}
		b.recs = append(b.recs, Record{Pid: 7}) // all zero: not sent
		return b
	}
	r.offer(mk(3)) // nobody listens: dropped
	deadline := time.Now().Add(5 * time.Second)
	for st.Dropped.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("interval without a sampler not dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}

	s := newSamplerAt(t, sock)
	r.failedAt = time.Time{} // skip the 10 s redial wait
	n := 3*maxRecords + 5
	r.offer(mk(n))
	r.offer(mk(n))
	r.offer(batch{bye: true})
	r.close()
	deadline = time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		byes := s.byes
		s.mu.Unlock()
		if byes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no BYE within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range n {
		c := s.get(fmt.Sprintf("/m/f%d", i), 7)
		if c[cReads] != 2*uint64(i+1) {
			t.Fatalf("file %d: %d reads, want %d", i, c[cReads], 2*(i+1))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxRecs != maxRecords || s.byes != 1 || len(s.hellos) != 1 {
		t.Errorf("largest INTERVAL %d records (want %d), %d BYE, %d HELLO", s.maxRecs, maxRecords, s.byes, len(s.hellos))
	}
	// HELLO + n FILEs + 2 × 4 INTERVALs + BYE.
	if want := 1 + n + 2*4 + 1; s.msgs != want {
		t.Errorf("%d messages, want %d", s.msgs, want)
	}
	if st.Intervals.Load() != 2 || st.Dropped.Load() != 1 {
		t.Errorf("sent %d, dropped %d", st.Intervals.Load(), st.Dropped.Load())
	}
	for _, err := range s.errs {
		t.Error("protocol:", err)
	}
}

// BenchmarkTableAccess is the accounting cost of one read request (the
// FUSE round trip around it costs tens of microseconds); no allocation.
func BenchmarkTableAccess(b *testing.B) {
	tb := NewTable(Limits{})
	h := &handle{f: tb.acquire("/m/f"), lastEnd: -1}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		off := int64(0)
		for pb.Next() {
			tb.access(h, 42, false, off, 65536, 1000)
			off += 65536
		}
	})
}

func TestTableAccessAllocs(t *testing.T) {
	tb := NewTable(Limits{})
	h := &handle{f: tb.acquire("/m/f"), lastEnd: -1}
	tb.access(h, 42, false, 0, 10, 1) // the pair's first use allocates it
	if n := testing.AllocsPerRun(100, func() { tb.access(h, 42, false, 0, 10, 1) }); n != 0 {
		t.Errorf("%v allocations per counted read", n)
	}
}
