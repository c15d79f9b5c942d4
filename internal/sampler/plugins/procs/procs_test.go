//go:build linux

package procs

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func top2() sampler.Configurable {
	c := DefaultConfig()
	c.Top = 2
	return c
}

func TestFixtures(t *testing.T) {
	if os.Getpagesize() != 4096 {
		t.Skip("goldens assume 4 KiB pages")
	}
	testutil.FixtureCases(t, "procs", top2)
}

// fakeProc is one process of a generated fixture.
type fakeProc struct {
	pid          int
	comm         string
	uid          int
	utime, stime uint64
	threads      int
	start        uint64
	rssPages     uint64
	noIO         bool
}

func (fp fakeProc) write(t testing.TB, root string) {
	t.Helper()
	d := filepath.Join(root, "proc", strconv.Itoa(fp.pid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 10 0 0 0 %d %d 0 0 20 0 %d 0 %d 100000 %d 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		fp.pid, fp.comm, fp.pid, fp.pid, fp.utime, fp.stime, fp.threads, fp.start, fp.rssPages)
	status := fmt.Sprintf("Name:\t%s\nState:\tR (running)\nPid:\t%d\nUid:\t%d\t%d\t%d\t%d\nThreads:\t%d\n", fp.comm, fp.pid, fp.uid, fp.uid, fp.uid, fp.uid, fp.threads)
	files := map[string]string{"stat": stat, "status": status}
	if !fp.noIO {
		files["io"] = fmt.Sprintf("rchar: 1\nwchar: 2\nread_bytes: %d\nwrite_bytes: %d\ncancelled_write_bytes: 0\n", fp.pid*1000, fp.pid*10)
	}
	for name, content := range files {
		// Rewrite in place: a kept-open descriptor must see the new content.
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeRoot(t testing.TB, root string, ps []fakeProc) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	passwd := "root:x:0:0::/root:/bin/sh\nalice:x:1001:1001::/home/alice:/bin/sh\n"
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, fp := range ps {
		fp.write(t, root)
	}
}

func newProcs(t testing.TB, root string, cfg *Config) *Procs {
	t.Helper()
	p, _ := testutil.NewPlugin(t, "procs", root, cfg)
	pp := p.(*Procs)
	t.Cleanup(func() { pp.Close() })
	return pp
}

// values maps "name pid" (pid empty for node-wide series) to the value.
func values(b *metric.Batch) map[string]float64 {
	m := map[string]float64{}
	for _, s := range b.Samples() {
		pid := ""
		for _, l := range s.Desc.Labels {
			if l.Name == "pid" {
				pid = l.Value
			}
		}
		m[s.Desc.Name+" "+pid] = s.Value
	}
	return m
}

func sample(t testing.TB, p *Procs, now time.Time) (map[string]float64, error) {
	t.Helper()
	var b metric.Batch
	b.Reset(now)
	err := p.Sample(context.Background(), now, &b)
	return values(&b), err
}

func mustSample(t testing.TB, p *Procs, now time.Time) map[string]float64 {
	t.Helper()
	v, err := sample(t, p, now)
	if err != nil {
		t.Fatalf("sample: %v", err)
	}
	return v
}

func TestCPURate(t *testing.T) {
	root := t.TempDir()
	a := fakeProc{pid: 10, comm: "solver", uid: 1001, utime: 1000, stime: 200, threads: 8, start: 50, rssPages: 100}
	idle := fakeProc{pid: 11, comm: "idle", uid: 0, utime: 5, stime: 5, threads: 1, start: 60, rssPages: 10}
	writeRoot(t, root, []fakeProc{a, idle})
	p := newProcs(t, root, DefaultConfig())

	t0 := time.Unix(1700000000, 0)
	v := mustSample(t, p, t0)
	if got := v["vigil_process_cpu_usage_ratio 10"]; got != 0 {
		t.Errorf("first tick ratio = %v, want 0", got)
	}
	if got := v["vigil_process_cpu_seconds_total 10"]; got != 12 {
		t.Errorf("cpu seconds = %v, want 12", got)
	}
	// Same time again: no division by zero, rate unchanged.
	v = mustSample(t, p, t0)
	if got := v["vigil_process_cpu_usage_ratio 10"]; got != 0 {
		t.Errorf("same-time ratio = %v, want 0", got)
	}

	// 3 s of CPU time (300 ticks) in 2 s of wall time: 1.5 cores.
	a.utime += 250
	a.stime += 50
	a.write(t, root)
	v = mustSample(t, p, t0.Add(2*time.Second))
	if got := v["vigil_process_cpu_usage_ratio 10"]; got != 1.5 {
		t.Errorf("ratio = %v, want 1.5", got)
	}
	if got := v["vigil_process_cpu_usage_ratio 11"]; got != 0 {
		t.Errorf("idle ratio = %v, want 0", got)
	}
	v = mustSample(t, p, t0.Add(2*time.Second))
	if got := v["vigil_process_cpu_usage_ratio 10"]; got != 1.5 {
		t.Errorf("same-time ratio after a rate = %v, want 1.5 kept", got)
	}

	// The pid is reused by a new process: no rate against the old one.
	reused := fakeProc{pid: 10, comm: "other", uid: 0, utime: 1, stime: 1, threads: 1, start: 9999, rssPages: 1}
	reused.write(t, root)
	v = mustSample(t, p, t0.Add(3*time.Second))
	if got := v["vigil_process_cpu_usage_ratio 10"]; got != 0 {
		t.Errorf("reused pid ratio = %v, want 0", got)
	}
	if s := findSeries(t, p, 10); s == nil || s.comm != "other" {
		t.Errorf("reused pid keeps the old command's series")
	}

	// A process exits: it leaves the output and its kept file is closed.
	openBefore := p.openLeft
	if err := os.RemoveAll(filepath.Join(root, "proc", "11")); err != nil {
		t.Fatal(err)
	}
	v = mustSample(t, p, t0.Add(4*time.Second))
	if _, ok := v["vigil_process_threads 11"]; ok {
		t.Errorf("exited process still reported")
	}
	if got := v["vigil_processes "]; got != 1 {
		t.Errorf("vigil_processes = %v, want 1", got)
	}
	if p.openLeft != openBefore+3 {
		t.Errorf("open budget = %d, want %d (stat, status and io of the exited process closed)", p.openLeft, openBefore+3)
	}
	if len(p.cur) != 1 {
		t.Errorf("tracked processes = %d, want 1", len(p.cur))
	}
}

// TestTopFilesKept checks that status and io stay open while a process is
// in a top set, are read again through the kept descriptors, and are
// closed when it leaves the sets.
func TestTopFilesKept(t *testing.T) {
	root := t.TempDir()
	a := fakeProc{pid: 10, comm: "a", uid: 1001, utime: 100, threads: 1, start: 1, rssPages: 900}
	b := fakeProc{pid: 11, comm: "b", uid: 0, utime: 1, threads: 1, start: 1, rssPages: 10}
	writeRoot(t, root, []fakeProc{a, b})
	cfg := DefaultConfig()
	cfg.Top = 1
	p := newProcs(t, root, cfg)
	t0 := time.Unix(1700000000, 0)
	state := func(pid int32) *proc {
		for i := range p.cur {
			if p.cur[i].pid == pid {
				return &p.cur[i]
			}
		}
		t.Fatalf("pid %d not tracked", pid)
		return nil
	}
	mustSample(t, p, t0)
	if sa, sb := state(10), state(11); sa.statusFD < 0 || sa.ioFD < 0 || sb.statusFD >= 0 || sb.ioFD >= 0 {
		t.Fatalf("status/io kept: a %d/%d (want open), b %d/%d (want -1)", sa.statusFD, sa.ioFD, sb.statusFD, sb.ioFD)
	}
	budget := p.openLeft

	// New content, read through the kept descriptor.
	io := "rchar: 1\nwchar: 2\nread_bytes: 777\nwrite_bytes: 5\ncancelled_write_bytes: 0\n"
	if err := os.WriteFile(filepath.Join(root, "proc", "10", "io"), []byte(io), 0o644); err != nil {
		t.Fatal(err)
	}
	v := mustSample(t, p, t0.Add(time.Second))
	if got := v["vigil_process_read_bytes_total 10"]; got != 777 {
		t.Errorf("read bytes = %v, want 777 through the kept io file", got)
	}
	if p.openLeft != budget {
		t.Errorf("open budget moved from %d to %d on a tick with the same top", budget, p.openLeft)
	}

	// b takes the lead in CPU and memory: a's status and io close, b's open.
	b.utime, b.rssPages = 10000, 5000
	b.write(t, root)
	v = mustSample(t, p, t0.Add(2*time.Second))
	if _, ok := v["vigil_process_threads 10"]; ok {
		t.Error("a still reported")
	}
	if sa, sb := state(10), state(11); sa.statusFD >= 0 || sa.ioFD >= 0 || sb.statusFD < 0 || sb.ioFD < 0 {
		t.Errorf("after the change: a %d/%d (want -1), b %d/%d (want open)", sa.statusFD, sa.ioFD, sb.statusFD, sb.ioFD)
	}
	if p.openLeft != budget {
		t.Errorf("open budget = %d, want %d (two closed, two opened)", p.openLeft, budget)
	}
}

func findSeries(t testing.TB, p *Procs, pid int32) *series {
	t.Helper()
	for i := range p.cur {
		if p.cur[i].pid == pid {
			return p.cur[i].series
		}
	}
	return nil
}

// TestRanking checks the emitted set is the union of the top by CPU rate
// and the top by RSS, computed here independently.
func TestRanking(t *testing.T) {
	for _, keepOpen := range []int{0, 4096} {
		t.Run(fmt.Sprintf("max_open_files=%d", keepOpen), func(t *testing.T) {
			root := t.TempDir()
			ps := make([]fakeProc, 40)
			for i := range ps {
				ps[i] = fakeProc{pid: 100 + i, comm: "p" + strconv.Itoa(i), uid: 1001, utime: uint64(1000 * i),
					threads: 1 + i%5, start: uint64(i), rssPages: uint64((i * 7919) % 101), noIO: i%3 == 0}
			}
			writeRoot(t, root, ps)
			cfg := DefaultConfig()
			cfg.Top = 4
			cfg.MaxOpenFiles = keepOpen
			p := newProcs(t, root, cfg)
			t0 := time.Unix(1700000000, 0)
			mustSample(t, p, t0)
			// CPU used over the next second, unrelated to the totals.
			used := make([]uint64, len(ps))
			for i := range ps {
				used[i] = uint64((i * 37) % 41)
				ps[i].utime += used[i]
				ps[i].write(t, root)
			}
			v := mustSample(t, p, t0.Add(time.Second))

			idx := make([]int, len(ps))
			for i := range idx {
				idx[i] = i
			}
			want := map[string]bool{}
			slices.SortFunc(idx, func(a, b int) int {
				if used[a] != used[b] {
					return int(used[b]) - int(used[a])
				}
				return int(ps[b].utime) - int(ps[a].utime)
			})
			for _, i := range idx[:4] {
				want[strconv.Itoa(ps[i].pid)] = true
			}
			slices.SortFunc(idx, func(a, b int) int {
				if ps[a].rssPages != ps[b].rssPages {
					return int(ps[b].rssPages) - int(ps[a].rssPages)
				}
				return ps[a].pid - ps[b].pid
			})
			for _, i := range idx[:4] {
				want[strconv.Itoa(ps[i].pid)] = true
			}
			got := map[string]bool{}
			for k := range v {
				if name, pid, _ := strings.Cut(k, " "); name == "vigil_process_threads" {
					got[pid] = true
				}
			}
			if !maps.Equal(got, want) {
				t.Errorf("reported pids %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
			for pid := range want {
				i, _ := strconv.Atoi(pid)
				fp := ps[i-100]
				if got, want := v["vigil_process_cpu_usage_ratio "+pid], float64(used[i-100])/100; got != want {
					t.Errorf("pid %s ratio = %v, want %v", pid, got, want)
				}
				_, hasIO := v["vigil_process_read_bytes_total "+pid]
				if hasIO == fp.noIO {
					t.Errorf("pid %s has io series = %v, want %v", pid, hasIO, !fp.noIO)
				}
			}
			if got := v["vigil_processes "]; got != 40 {
				t.Errorf("vigil_processes = %v, want 40", got)
			}
		})
	}
}

func TestBadProcess(t *testing.T) {
	root := t.TempDir()
	writeRoot(t, root, []fakeProc{
		{pid: 1, comm: "init", threads: 1, rssPages: 5},
		{pid: 3, comm: "ok", threads: 2, rssPages: 7},
	})
	bad := filepath.Join(root, "proc", "2")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "stat"), []byte("2 (x) S 1 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newProcs(t, root, DefaultConfig())
	v, err := sample(t, p, time.Unix(1700000000, 0))
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "proc", "2", "stat")) {
		t.Fatalf("err = %v, want one naming proc/2/stat", err)
	}
	if got := v["vigil_processes "]; got != 2 {
		t.Errorf("vigil_processes = %v, want 2 (the readable ones)", got)
	}
	if _, ok := v["vigil_process_threads 3"]; !ok {
		t.Errorf("other processes not reported after a bad one")
	}

	// A status without a Uid line is an error for that process only.
	if err := os.WriteFile(filepath.Join(root, "proc", "3", "status"), []byte("Name:\tok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(bad); err != nil {
		t.Fatal(err)
	}
	v, err = sample(t, p, time.Unix(1700000001, 0))
	if err == nil || !strings.Contains(err.Error(), "proc/3/status") || !strings.Contains(err.Error(), "no Uid line") {
		t.Fatalf("err = %v, want one naming proc/3/status", err)
	}
	if _, ok := v["vigil_process_threads 1"]; !ok {
		t.Errorf("process 1 not reported")
	}

	// No /proc at all.
	p2 := newProcs(t, t.TempDir(), DefaultConfig())
	if _, err := sample(t, p2, time.Unix(1700000000, 0)); err == nil || !strings.Contains(err.Error(), "proc") {
		t.Errorf("missing /proc: err = %v", err)
	}
}

func TestUsers(t *testing.T) {
	root := t.TempDir()
	// No etc/passwd: numeric uids.
	(fakeProc{pid: 7, comm: "bad\xffname", uid: 1001, threads: 1}).write(t, root)
	p := newProcs(t, root, DefaultConfig())
	var b metric.Batch
	now := time.Unix(1700000000, 0)
	b.Reset(now)
	if err := p.Sample(context.Background(), now, &b); err != nil {
		t.Fatal(err)
	}
	labels := b.Samples()[0].Desc.Labels
	want := []metric.Label{{Name: "pid", Value: "7"}, {Name: "user", Value: "1001"}, {Name: "command", Value: "bad\uFFFDname"}}
	if !slices.Equal(labels, want) {
		t.Errorf("labels = %v, want %v", labels, want)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.Top = 0 }, "top must be between 1 and 1000, got 0"},
		{func(c *Config) { c.Top = 1001 }, "top must be"},
		{func(c *Config) { c.MaxProcesses = 0 }, "max_processes"},
		{func(c *Config) { c.MaxOpenFiles = -1 }, "max_open_files"},
		{func(c *Config) { c.MaxOpenFiles = 0 }, ""},
	} {
		c := DefaultConfig()
		tc.mod(c)
		err := c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Validate() = %v, want %q", *c, err, tc.want)
		}
	}
	reg, _ := sampler.Lookup("procs")
	c := reg.NewConfig().(*Config)
	c.Top = -3
	if err := reg.New(c).Init(sampler.Env{}); err == nil {
		t.Error("Init accepted top = -3")
	}
}

func TestParseStat(t *testing.T) {
	tail := " 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	for _, tc := range []struct {
		in      string
		want    Stat
		wantErr string
	}{
		{in: "42 (bash) S 1 42 42 34816 42 4194304 100 0 0 0 150 25 0 0 20 0 1 0 9000 1000 321 18446744073709551615" + tail,
			want: Stat{Comm: []byte("bash"), UTime: 150, STime: 25, Threads: 1, StartTime: 9000, RSSPages: 321}},
		// A command name with blanks and parentheses ends at the last ')'.
		{in: "7 (a) (b c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 12 0 5 1 -2 0\n",
			want: Stat{Comm: []byte("a) (b c)"), UTime: 3, STime: 4, Threads: 12, StartTime: 5, RSSPages: 0}},
		{in: "7 () Z 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 1 2",
			want: Stat{Comm: []byte(""), UTime: 3, STime: 4, Threads: 1, StartTime: 5, RSSPages: 2}},
		{in: "", wantErr: "no (comm)"},
		{in: "7 bash S 1", wantErr: "no (comm)"},
		{in: "7 )bash( S 1", wantErr: "no (comm)"},
		{in: "7 (bash) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 1\n", wantErr: "want at least 22 fields"},
		{in: "7 (bash) S 1 7 7 0 -1 0 0 0 0 0 x 4 0 0 20 0 1 0 5 1 2\n", wantErr: `field 14 "x"`},
		{in: "7 (bash) S 1 7 7 0 -1 0 0 0 0 0 -3 4 0 0 20 0 1 0 5 1 2\n", wantErr: `field 14 "-3"`},
		{in: "7 (bash) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 1 2x\n", wantErr: `field 24`},
		{in: "7 (bash) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 99999999999999999999 1 2\n", wantErr: `field 22`},
	} {
		var got Stat
		err := ParseStat([]byte(tc.in), &got)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseStat(%q) err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseStat(%q): %v", tc.in, err)
			continue
		}
		if string(got.Comm) != string(tc.want.Comm) || got.UTime != tc.want.UTime || got.STime != tc.want.STime ||
			got.Threads != tc.want.Threads || got.StartTime != tc.want.StartTime || got.RSSPages != tc.want.RSSPages {
			t.Errorf("ParseStat(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestParseUID(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    uint32
		wantErr string
	}{
		{in: "Name:\tsshd\nUid:\t0\t1001\t0\t1001\nGid:\t0\t0\t0\t0\n", want: 1001},
		{in: "Uid:\t4294967295\t4294967294\t0\t0", want: 4294967294},
		{in: "Name:\tx\nGid:\t0\t0\t0\t0\n", wantErr: "no Uid line"},
		{in: "", wantErr: "no Uid line"},
		{in: "Uid:\t5\n", wantErr: "want 4 ids"},
		{in: "Uid:\t1\tx\t1\t1\n", wantErr: "effective uid"},
		{in: "Uid:\t1\t4294967296\t1\t1\n", wantErr: "effective uid"},
	} {
		got, err := ParseUID([]byte(tc.in))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseUID(%q) err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseUID(%q) = %d, %v, want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestParseIO(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    IO
		wantErr string
	}{
		{in: "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n", want: IO{4096, 8192}},
		{in: "write_bytes: 1\nread_bytes: 2", want: IO{2, 1}},
		{in: "rchar: 10\nread_bytes: 4096\n", wantErr: "want read_bytes and write_bytes"},
		{in: "", wantErr: "want read_bytes and write_bytes"},
		{in: "read_bytes: -1\nwrite_bytes: 0\n", wantErr: `read_bytes "-1"`},
		{in: "read_bytes: 1\nwrite_bytes:\n", wantErr: `write_bytes ""`},
	} {
		var got IO
		err := ParseIO([]byte(tc.in), &got)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseIO(%q) err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseIO(%q) = %+v, %v, want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParsePasswd(t *testing.T) {
	in := "root:x:0:0:root:/root:/bin/bash\n" +
		"# comment:x:5:5\n" +
		"+nisuser::7:7:::\n" +
		"alice:x:1001:1001::/home/alice:/bin/sh\n" +
		"toor:x:0:0::/root:/bin/sh\n" + // second name for uid 0: first wins
		"short:x\n" +
		"neg:x:-1:0::/:/bin/sh\n" +
		"huge:x:4294967296:0::/:/bin/sh\n" +
		":x:9:9::/:/bin/sh\n" +
		"bad\xffutf:x:12:12::/:/bin/sh"
	want := map[uint32]string{0: "root", 1001: "alice", 12: "bad\uFFFDutf"}
	if got := ParsePasswd([]byte(in)); !maps.Equal(got, want) {
		t.Errorf("ParsePasswd = %v, want %v", got, want)
	}
}

// dirent encodes one linux_dirent64 record as getdents returns it.
func dirent(name string) []byte {
	reclen := (19 + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b, 1)
	binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
	b[18] = 4 // DT_DIR
	copy(b[19:], name)
	return b
}

func TestParseDirents(t *testing.T) {
	var buf []byte
	for _, n := range []string{".", "..", "1", "self", "4242", "0123", "12a", "2147483647", "2147483648", "thread-self", "99"} {
		buf = append(buf, dirent(n)...)
	}
	got, err := parseDirents(buf, []int32{5})
	if want := []int32{5, 1, 4242, 2147483647, 99}; err != nil || !slices.Equal(got, want) {
		t.Errorf("parseDirents = %v, %v, want %v", got, err, want)
	}
	if _, err := parseDirents(buf[:len(buf)-3], nil); err == nil {
		t.Error("truncated record accepted")
	}
	bad := dirent("1")
	binary.NativeEndian.PutUint16(bad[16:], 3)
	if _, err := parseDirents(bad, nil); err == nil {
		t.Error("record length 3 accepted")
	}
}

func TestInsertTop(t *testing.T) {
	ps := []proc{{pid: 1, rss: 5}, {pid: 2, rss: 9}, {pid: 3, rss: 1}, {pid: 4, rss: 9}, {pid: 5, rss: 7}}
	var top []int
	for i := range ps {
		top = insertTop(top, ps, i, 3, moreRSS)
	}
	if want := []int{1, 3, 4}; !slices.Equal(top, want) {
		t.Errorf("top = %v, want %v (rss 9 pid 2, rss 9 pid 4, rss 7)", top, want)
	}
}

func TestZeroAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p, _ := testutil.NewPlugin(t, "procs", "testdata/basic", top2())
	t.Cleanup(func() { p.(*Procs).Close() })
	if n := testutil.AllocsPerTick(t, p); n != 0 {
		t.Errorf("allocs per tick = %v, want 0", n)
	}
	for _, keep := range []int{0, 4096} {
		root := t.TempDir()
		writeRoot(t, root, genProcs(300))
		cfg := DefaultConfig()
		cfg.MaxOpenFiles = keep
		pp := newProcs(t, root, cfg)
		if n := testutil.AllocsPerTick(t, pp); n != 0 {
			t.Errorf("max_open_files=%d: allocs per tick with 300 processes = %v, want 0", keep, n)
		}
	}
}

func genProcs(n int) []fakeProc {
	ps := make([]fakeProc, n)
	for i := range ps {
		ps[i] = fakeProc{pid: 1000 + i*3, comm: "job" + strconv.Itoa(i%17), uid: 1001 + i%2, utime: uint64(i * 13 % 997),
			stime: uint64(i % 7), threads: 1 + i%9, start: uint64(i), rssPages: uint64(i * 31 % 1009), noIO: i%4 == 0}
	}
	return ps
}

func BenchmarkSample(b *testing.B) {
	for _, keep := range []int{4096, 0} {
		b.Run(fmt.Sprintf("procs=1000/max_open_files=%d", keep), func(b *testing.B) {
			root := b.TempDir()
			writeRoot(b, root, genProcs(1000))
			cfg := DefaultConfig()
			cfg.MaxOpenFiles = keep
			p := newProcs(b, root, cfg)
			var batch metric.Batch
			ctx := context.Background()
			now := time.Unix(1700000000, 0)
			for range 2 {
				batch.Reset(now)
				if err := p.Sample(ctx, now, &batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Second)
				batch.Reset(now)
				if err := p.Sample(ctx, now, &batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (bash) S 1 42 42 34816 42 4194304 100 0 0 0 150 25 0 0 20 0 1 0 9000 1000 321 0\n"))
	f.Add([]byte("7 (a) (b)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 12 0 5 1 -2 0"))
	f.Add([]byte("()"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st Stat
		if ParseStat(data, &st) == nil && len(st.Comm) > len(data) {
			t.Fatalf("comm longer than input")
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Name:\tsshd\nUid:\t0\t1001\t0\t1001\n"), []byte("read_bytes: 1\nwrite_bytes: 2\n"))
	f.Add([]byte("Uid:"), []byte("read_bytes:"))
	f.Fuzz(func(t *testing.T, status, io []byte) {
		_, _ = ParseUID(status)
		var x IO
		_ = ParseIO(io, &x)
	})
}

func FuzzParsePasswd(f *testing.F) {
	f.Add([]byte("root:x:0:0:root:/root:/bin/bash\nalice:x:1001:1001::/home/alice:/bin/sh\n"))
	f.Add([]byte("::::\n+:"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(ParsePasswd(data)) > maxUsers {
			t.Fatal("user cache over its bound")
		}
	})
}

func FuzzParseDirents(f *testing.F) {
	f.Add(append(dirent("1"), dirent("self")...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = parseDirents(data, nil)
	})
}

// BenchmarkSampleHost samples the real /proc of the machine running it.
func BenchmarkSampleHost(b *testing.B) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("no /proc")
	}
	p := newProcs(b, "/", DefaultConfig())
	var batch metric.Batch
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		batch.Reset(now)
		_ = p.Sample(ctx, now, &batch)
	}
	b.ReportMetric(float64(len(p.cur)), "procs")
}

func TestParseJob(t *testing.T) {
	for in, want := range map[string]string{
		"0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n":                 "42",
		"0::/system.slice/cn1_slurmstepd.scope/job_7/step_extern/user/task_0":           "7",
		"12:memory:/slurm_cn01/uid_1000/job_123/step_batch/task_0\n1:name=systemd:/x\n": "123",
		"3:freezer:/slurm/uid_5/job_9\n":                                                "9",
		"0::/user.slice/user-1000.slice/session-3.scope\n":                              "",
		"0::/system.slice/slurmstepd.scope/system\n":                                    "",
		"0::/job_/x\n0::/job_01/x\n0::/job_1a/x\n0::/myjob_5x/\n":                       "",
		"0::/a/job_12345678901/x\n":                                                     "",
		"1:cpu:/docker/job_abc\n2:memory:/slurm/uid_0/job_3/step_0\n":                   "3",
		"": "",
	} {
		if got := ParseJob([]byte(in)); got != want {
			t.Errorf("ParseJob(%q) = %q, want %q", in, got, want)
		}
	}
}
