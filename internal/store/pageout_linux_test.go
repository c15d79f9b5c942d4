package store

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func TestParseMapsLine(t *testing.T) {
	for _, c := range []struct {
		line       string
		path       string
		start, end uintptr
		ok         bool
	}{
		{"7f10a0000000-7f10a8000000 r--s 00000000 08:01 1234                       /data/raw/chunks_head/000001", "/data/raw/chunks_head/000001", 0x7f10a0000000, 0x7f10a8000000, true},
		{"7f10a0000000-7f10a0001000 r--s 00000000 08:01 1234 /data/raw dir/with space (deleted)", "/data/raw dir/with space (deleted)", 0x7f10a0000000, 0x7f10a0001000, true},
		{"00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon", "/usr/bin/dbus-daemon", 0x400000, 0x452000, true},
		{"c000000000-c000400000 rw-p 00000000 00:00 0", "", 0, 0, false},                                      // anonymous
		{"7ffd0a1b2000-7ffd0a1d3000 rw-p 00000000 00:00 0                          [stack]", "", 0, 0, false}, // not a file
		{"zz-7f rw-p 0 0 0 /x", "", 0, 0, false},
		{"7f-7e rw-p 0 0 0 /x", "", 0, 0, false}, // end before start
		{"7f10 r--s", "", 0, 0, false},
		{"", "", 0, 0, false},
	} {
		path, s, e, ok := parseMapsLine([]byte(c.line))
		if ok != c.ok || string(path) != c.path || s != c.start || e != c.end {
			t.Errorf("parseMapsLine(%q) = %q %#x %#x %v, want %q %#x %#x %v", c.line, path, s, e, ok, c.path, c.start, c.end, c.ok)
		}
	}
}

func TestPageOutFromSelectsDir(t *testing.T) {
	maps := strings.Join([]string{
		"1000-3000 r--s 00000000 08:01 1 /data/raw/chunks_head/000001",
		"3000-4000 r--s 00000000 08:01 2 /data/raw/01JABC/chunks/000001",
		"4000-8000 r--s 00000000 08:01 3 /data/raw2/chunks_head/000001", // a sibling, not under dir
		"8000-9000 rw-p 00000000 00:00 0",
		"9000-a000 r--p 00000000 08:01 4 /usr/lib/libc.so.6",
	}, "\n")
	var got []uintptr
	n, err := pageOutFrom(strings.NewReader(maps), "/data/raw", func(addr, length uintptr) error {
		got = append(got, addr, length)
		return nil
	})
	if err != nil || n != 0x3000 || len(got) != 4 || got[0] != 0x1000 || got[1] != 0x2000 || got[2] != 0x3000 || got[3] != 0x1000 {
		t.Fatalf("advised %#x (%v), total %#x; want 0x1000+0x2000 and 0x3000+0x1000, total 0x3000", got, err, n)
	}
}

func FuzzParseMapsLine(f *testing.F) {
	f.Add([]byte("7f10a0000000-7f10a8000000 r--s 00000000 08:01 1234 /data/raw/chunks_head/000001"))
	f.Add([]byte("c000000000-c000400000 rw-p 00000000 00:00 0"))
	f.Fuzz(func(t *testing.T, line []byte) {
		path, s, e, ok := parseMapsLine(line)
		if ok && (e <= s || len(path) == 0 || path[0] != '/' || !bytes.Contains(line, path)) {
			t.Fatalf("parseMapsLine(%q) = %q %#x %#x: accepted a bad line", line, path, s, e)
		}
	})
}

// mappedRSS sums the resident bytes of this process's mappings of files
// under dir, from /proc/self/smaps.
func mappedRSS(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	var total int64
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		first, _, _ := bytes.Cut(line, []byte(" "))
		if bytes.IndexByte(first, '-') > 0 && !bytes.HasSuffix(first, []byte(":")) { // a mapping's header line
			path, _, _, ok := parseMapsLine(line)
			in = ok && bytes.HasPrefix(path, []byte(dir+"/"))
			continue
		}
		if in && bytes.HasPrefix(line, []byte("Rss:")) {
			f := strings.Fields(string(line))
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			total += kb << 10
		}
	}
	return total
}

// A rollup pass reads the head's memory-mapped chunk files; afterwards
// their pages must not stay in the process's RSS.
func TestRollupPassReleasesMappedPages(t *testing.T) {
	dir := t.TempDir()
	raw := openT(t, dir)
	const series, secs = 2000, 1800 // 7 full chunks of 240 samples a series, mapped
	descs := make([]*metric.Desc, series)
	vals := make([]float64, series)
	for i := range descs {
		descs[i] = metric.NewDesc("node_test_value", "A test series.", metric.Gauge, "i", strconv.Itoa(i))
	}
	for sec := range secs {
		for i := range vals {
			vals[i] = float64(sec*(i+1)) * 1.37 // varied, so chunks are not tiny
		}
		if err := raw.AppendTick("cn01", base.Add(time.Duration(sec)*time.Second), descs, vals, false); err != nil {
			t.Fatal(err)
		}
	}
	raw.tdb().ForceHeadMMap() // as the TSDB's own loop does every minute
	r, err := OpenRollup(raw, RollupOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var before, after int64
	calls := 0
	r.pageOut = func(d string) (int64, error) {
		calls++
		before = mappedRSS(t, d)
		n, err := pageOutMapped(d)
		after = mappedRSS(t, d)
		return n, err
	}
	if _, err := r.Step(context.Background(), base.Add(secs*time.Second+time.Minute)); err != nil {
		t.Fatal(err)
	}
	// 2,000 series × 7 chunks of about 300 bytes: several MB were read
	// through the mappings.
	if calls == 0 || before < 1<<20 {
		t.Fatalf("%d calls, %d bytes of mapped chunk files resident after the pass: the test did not read through the mappings", calls, before)
	}
	if after > before/4 || r.Stats().PagedOut == 0 {
		t.Fatalf("mapped chunk files: %d bytes resident before paging out, %d after (paged out %d bytes of mappings); want a quarter or less", before, after, r.Stats().PagedOut)
	}
	t.Logf("resident mapped chunk bytes: %d before, %d after", before, after)
}
