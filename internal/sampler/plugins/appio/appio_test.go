//go:build linux

package appio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:40 / /scratch rw shared:2 - lustre 10.0.0.1@o2ib:/scratch rw
31 22 0:41 / /home rw shared:3 - nfs4 srv:/home rw
32 31 0:42 / /home/with\040space rw - tmpfs tmpfs rw
`

// fixture makes a root with mountinfo and, for each pid given, a
// /proc/<pid>/cgroup naming the job ("" for a process in no job).
func fixture(t testing.TB, jobs map[int]string) string {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "proc/self/mountinfo"), mountinfo)
	for pid, job := range jobs {
		cg := "0::/user.slice/user-1000.slice/session-3.scope\n"
		if job != "" {
			cg = "0::/system.slice/slurmstepd.scope/job_" + job + "/step_0/user/task_0\n"
		}
		write(t, filepath.Join(root, "proc", fmt.Sprint(pid), "cgroup"), cg)
	}
	return root
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newPlugin(t testing.TB, root string, cfg *Config) *Plugin {
	t.Helper()
	if cfg == nil {
		cfg = DefaultConfig()
	}
	p := New(cfg)
	env := sampler.Env{FS: kernfs.NewFS(root), Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if err := p.Init(env); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	t testing.TB
	c *net.UnixConn
}

func dial(t testing.TB, p *Plugin) *client {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: p.path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t, c}
}

func (c *client) send(msgs ...[]byte) {
	c.t.Helper()
	for _, m := range msgs {
		if _, err := c.c.Write(m); err != nil {
			c.t.Fatal(err)
		}
	}
}

// closedByPeer waits until the sampler has closed the connection.
func (c *client) closedByPeer() bool {
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [16]byte
	n, err := c.c.Read(b[:])
	return n == 0 && (err == nil || errors.Is(err, net.ErrClosed) || !isTimeout(err))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func hello(job string) []byte {
	return appio.AppendHello(nil, appio.Hello{Rank: 5, IntervalMS: 1000, Exe: "/usr/bin/dd", JobID: job, Client: "test"})
}

func file(id uint32, path string) []byte {
	return appio.AppendFile(nil, appio.File{ID: id, Path: path})
}

func interval(recs ...appio.Record) []byte {
	return appio.AppendInterval(nil, 1_000_000_000, 2_000_000_000, recs)
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitRecords waits until n records were received and their message
// handled (the handler holds the lock while it counts).
func waitRecords(t testing.TB, p *Plugin, n uint64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d records", n), func() bool { return p.nRecords.Load() == n })
	p.mu.Lock()
	p.mu.Unlock() //lint:ignore SA2001 waits for the handler to finish its message
}

// key names a series: name{label=value,...} in the descriptor's order.
func key(d *metric.Desc) string {
	var sb strings.Builder
	sb.WriteString(d.Name)
	sb.WriteByte('{')
	for i, l := range d.Labels {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(l.Name + "=" + l.Value)
	}
	sb.WriteByte('}')
	return sb.String()
}

func sample(t testing.TB, p *Plugin, now time.Time) map[string]float64 {
	t.Helper()
	var b metric.Batch
	b.Reset(now)
	if err := p.Sample(context.Background(), now, &b); err != nil {
		t.Fatalf("sample: %v", err)
	}
	m := map[string]float64{}
	for i, d := range b.Descs {
		k := key(d)
		if _, dup := m[k]; dup {
			t.Fatalf("series twice in one tick: %s", k)
		}
		m[k] = b.Values[i]
	}
	return m
}

func series(job, mp, fstype, name string, extra ...string) string {
	s := name + "{jobid=" + job + ",mountpoint=" + mp + ",fstype=" + fstype
	for i := 0; i+1 < len(extra); i += 2 {
		s += "," + extra[i] + "=" + extra[i+1]
	}
	return s + "}"
}

// TestEndToEnd sends HELLO, FILE and INTERVAL over a real socket and
// checks every series of the job's file systems, the job coming from the
// process's cgroup (not the HELLO's SLURM_JOB_ID).
func TestEndToEnd(t *testing.T) {
	root := fixture(t, map[int]string{os.Getpid(): "4242"})
	p := newPlugin(t, root, nil)
	if m := sample(t, p, time.Now()); len(m) != nSelf || m["vigil_appio_connections{}"] != 0 {
		t.Fatalf("before any connection: %v", m)
	}
	c := dial(t, p)
	w := appio.Record{FileID: 1}
	w.C[appio.Opens], w.C[appio.Closes], w.C[appio.Writes] = 1, 1, 100000
	w.C[appio.BytesWritten], w.C[appio.WriteNS], w.C[appio.MetaNS] = 102_400_000, 250_000_000, 1_500_000
	w.C[appio.SeqAccesses], w.C[appio.RandomAccesses] = 99999, 0
	w.C[appio.WriteHist+1] = 100000 // 1 KiB writes: the (100, 1024] bucket
	r := appio.Record{FileID: 2}
	r.C[appio.Reads], r.C[appio.BytesRead], r.C[appio.ReadNS] = 3, 150, 3000
	r.C[appio.ReadHist], r.C[appio.ReadHist+1] = 2, 1
	r.C[appio.Stats], r.C[appio.Seeks], r.C[appio.Syncs], r.C[appio.Mmaps], r.C[appio.MetaOther] = 4, 5, 6, 7, 8
	sp := appio.Record{FileID: 3}
	sp.C[appio.Writes], sp.C[appio.BytesWritten] = 1, 10
	other := appio.Record{FileID: 0} // the library's "other files"
	other.C[appio.Opens] = 9
	c.send(hello("999"), file(1, "/scratch/u/out.dat"), file(2, "/home/u/in"), file(3, "/home/with space/f"),
		interval(w, r, sp, other, appio.Record{FileID: 2}), interval(w), appio.AppendBye(nil))
	waitRecords(t, p, 5)

	m := sample(t, p, time.Now())
	want := map[string]float64{
		"vigil_appio_processes{jobid=4242}":                                                                1,
		series("4242", "/scratch", "lustre", "vigil_appio_bytes_total", "op", "write"):                     204_800_000,
		series("4242", "/scratch", "lustre", "vigil_appio_bytes_total", "op", "read"):                      0,
		series("4242", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write"):                     200000,
		series("4242", "/scratch", "lustre", "vigil_appio_calls_total", "op", "open"):                      2,
		series("4242", "/scratch", "lustre", "vigil_appio_calls_total", "op", "close"):                     2,
		series("4242", "/scratch", "lustre", "vigil_appio_seconds_total", "op", "write"):                   0.5,
		series("4242", "/scratch", "lustre", "vigil_appio_seconds_total", "op", "meta"):                    0.003,
		series("4242", "/scratch", "lustre", "vigil_appio_accesses_total", "pattern", "sequential"):        199998,
		series("4242", "/scratch", "lustre", "vigil_appio_access_size_total", "op", "write", "le", "100"):  0,
		series("4242", "/scratch", "lustre", "vigil_appio_access_size_total", "op", "write", "le", "1024"): 200000,
		series("4242", "/scratch", "lustre", "vigil_appio_access_size_total", "op", "write", "le", "+Inf"): 200000,
		series("4242", "/home", "nfs4", "vigil_appio_bytes_total", "op", "read"):                           150,
		series("4242", "/home", "nfs4", "vigil_appio_calls_total", "op", "read"):                           3,
		series("4242", "/home", "nfs4", "vigil_appio_calls_total", "op", "stat"):                           4,
		series("4242", "/home", "nfs4", "vigil_appio_calls_total", "op", "seek"):                           5,
		series("4242", "/home", "nfs4", "vigil_appio_calls_total", "op", "sync"):                           6,
		series("4242", "/home", "nfs4", "vigil_appio_calls_total", "op", "mmap"):                           7,
		series("4242", "/home", "nfs4", "vigil_appio_calls_total", "op", "meta"):                           8,
		series("4242", "/home", "nfs4", "vigil_appio_seconds_total", "op", "read"):                         3e-6,
		series("4242", "/home", "nfs4", "vigil_appio_access_size_total", "op", "read", "le", "100"):        2,
		series("4242", "/home", "nfs4", "vigil_appio_access_size_total", "op", "read", "le", "1024"):       3,
		series("4242", "/home", "nfs4", "vigil_appio_access_size_total", "op", "read", "le", "10240"):      3,
		series("4242", "/home/with space", "tmpfs", "vigil_appio_bytes_total", "op", "write"):              10,
		series("4242", "other", "", "vigil_appio_calls_total", "op", "open"):                               9,
		"vigil_appio_connections{}":                     1,
		"vigil_appio_connections_total{}":               1,
		"vigil_appio_records_total{}":                   5, // the all-zero one left out
		"vigil_appio_folded_records_total{reason=file}": 1,
		"vigil_appio_jobs{}":                            1,
		"vigil_appio_rejected_total{reason=protocol}":   0,
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("missing %s", k)
		} else if got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	// 4 file systems (3 mounts and "other") × nSeries, the job's
	// processes and the self series: nothing else.
	if len(m) != 4*nSeries+1+nSelf {
		t.Errorf("%d series, want %d", len(m), 4*nSeries+1+nSelf)
	}
	for k := range m {
		if strings.Contains(k, "999") {
			t.Errorf("the HELLO's job id was used although the cgroup names one: %s", k)
		}
	}

	recs := p.Recent()
	if len(recs) != 5 {
		t.Fatalf("%d recent records, want 5", len(recs))
	}
	r0 := recs[0]
	if r0.JobID != "4242" || r0.PID != uint32(os.Getpid()) || r0.UID != uint32(os.Getuid()) || r0.Rank != 5 ||
		r0.Path != "/scratch/u/out.dat" || r0.MountPoint != "/scratch" || r0.FSType != "lustre" ||
		r0.Start != 1e9 || r0.End != 2e9 || r0.Exe != "/usr/bin/dd" || r0.Counters != w.C {
		t.Errorf("first record %+v", r0)
	}
	if recs[3].Path != "" || recs[3].MountPoint != Other || recs[4].Path != "/scratch/u/out.dat" {
		t.Errorf("records out of order or misattributed: %+v", recs)
	}
}

// TestJobFallback: without a job cgroup the HELLO's SLURM_JOB_ID is
// used; a malformed one is not.
func TestJobFallback(t *testing.T) {
	for _, tc := range []struct{ cgroup, env, want string }{
		{"", "777", "777"},
		{"", "77; rm -rf", ""},
		{"", "", ""},
		{"12", "777", "12"},
	} {
		root := fixture(t, map[int]string{os.Getpid(): tc.cgroup})
		p := newPlugin(t, root, nil)
		c := dial(t, p)
		c.send(hello(tc.env))
		waitFor(t, "the job", func() bool {
			_, ok := sample(t, p, time.Now())["vigil_appio_processes{jobid="+tc.want+"}"]
			return ok
		})
		p.Close()
	}
}

// TestPeerCredentials: a client speaks only for itself. Its FILE and
// record pids are replaced by the connection's (from SO_PEERCRED) unless
// its uid is one of iofs_uids, whose named processes are attributed to
// their own jobs.
func TestPeerCredentials(t *testing.T) {
	self := os.Getpid()
	root := fixture(t, map[int]string{self: "1", 777: "77"})
	rec := appio.Record{FileID: 1, PID: 777}
	rec.C[appio.BytesRead] = 42
	iofsFile := appio.AppendFile(nil, appio.File{ID: 1, Flags: appio.FlagIOFS, PID: 777, Path: "/scratch/f"})

	cfg := DefaultConfig()
	cfg.IOFSUIDs = nil
	p := newPlugin(t, root, cfg)
	c := dial(t, p)
	c.send(hello(""), iofsFile, interval(rec))
	waitRecords(t, p, 1)
	m := sample(t, p, time.Now())
	if m[series("1", "/scratch", "lustre", "vigil_appio_bytes_total", "op", "read")] != 42 {
		t.Errorf("untrusted client's I/O not under its own job: %v", m)
	}
	for k := range m {
		if strings.Contains(k, "jobid=77,") || strings.Contains(k, "jobid=77}") {
			t.Errorf("untrusted client claimed another process's job: %s", k)
		}
	}
	if r := p.Recent()[0]; r.PID != uint32(self) || r.JobID != "1" {
		t.Errorf("record pid %d job %q, want the connection's %d, 1", r.PID, r.JobID, self)
	}
	p.Close()

	cfg = DefaultConfig()
	cfg.IOFSUIDs = []uint32{uint32(os.Getuid())}
	p = newPlugin(t, root, cfg)
	c = dial(t, p)
	c.send(hello(""), iofsFile, interval(rec))
	waitRecords(t, p, 1)
	m = sample(t, p, time.Now())
	if m[series("77", "/scratch", "lustre", "vigil_appio_bytes_total", "op", "read")] != 42 || m["vigil_appio_processes{jobid=77}"] != 0 || m["vigil_appio_processes{jobid=1}"] != 1 {
		t.Errorf("iofs connection's record not under the named process's job: %v", m)
	}
	if r := p.Recent()[0]; r.PID != 777 || r.JobID != "77" || r.Rank != -1 {
		t.Errorf("iofs record %+v", r)
	}
}

// TestConnectionCap refuses connections beyond max_conns and counts them.
func TestConnectionCap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxConns = 2
	p := newPlugin(t, fixture(t, nil), cfg)
	a, b := dial(t, p), dial(t, p)
	a.send(hello(""))
	b.send(hello(""))
	waitFor(t, "two processes", func() bool { return sample(t, p, time.Now())["vigil_appio_processes{jobid=}"] == 2 })
	c := dial(t, p)
	if !c.closedByPeer() {
		t.Errorf("third connection not closed")
	}
	m := sample(t, p, time.Now())
	if m["vigil_appio_rejected_total{reason=max_conns}"] != 1 || m["vigil_appio_connections{}"] != 2 || m["vigil_appio_processes{jobid=}"] != 2 {
		t.Errorf("after the cap: %v", m)
	}
	a.c.Close()
	waitFor(t, "a place", func() bool { return p.nConns.Load() == 1 })
	d := dial(t, p)
	d.send(hello(""))
	waitFor(t, "the new connection", func() bool { return p.nConns.Load() == 2 })
}

// TestConnectionLimits: one user cannot take every place, and a
// connection that says nothing is closed after the HELLO timeout.
func TestConnectionLimits(t *testing.T) {
	saved := helloTimeout
	helloTimeout = 200 * time.Millisecond
	t.Cleanup(func() { helloTimeout = saved })
	cfg := DefaultConfig()
	cfg.MaxConnsPerUID = 1
	p := newPlugin(t, fixture(t, nil), cfg)
	a := dial(t, p)
	a.send(hello(""))
	waitFor(t, "the connection", func() bool { return p.nConns.Load() == 1 })
	if b := dial(t, p); !b.closedByPeer() {
		t.Error("second connection of the same uid not refused")
	}
	if p.rejCap.Load() != 1 {
		t.Errorf("refusals counted %d", p.rejCap.Load())
	}
	a.c.Close()
	waitFor(t, "the place freed", func() bool { return p.nConns.Load() == 0 })
	idle := dial(t, p)
	start := time.Now()
	if !idle.closedByPeer() {
		t.Error("connection without HELLO not closed")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %v", d)
	}
	waitFor(t, "the place freed", func() bool { return p.nConns.Load() == 0 })
	// After HELLO, idle is fine.
	c := dial(t, p)
	c.send(hello(""))
	time.Sleep(3 * helloTimeout)
	if p.nConns.Load() != 1 {
		t.Errorf("connection idle after HELLO was closed")
	}
}

// TestBadClients: garbage, oversized messages and protocol violations
// close that connection only, counted; a good client goes on.
func TestBadClients(t *testing.T) {
	p := newPlugin(t, fixture(t, map[int]string{os.Getpid(): "5"}), nil)
	good := dial(t, p)
	good.send(hello(""), file(1, "/scratch/a"))
	rec := appio.Record{FileID: 1}
	rec.C[appio.Writes] = 1
	bad := [][][]byte{
		{[]byte("GET / HTTP/1.0\r\n\r\n")},
		{hello(""), append(interval(rec)[:appio.HeaderSize+20+10:appio.HeaderSize+20+10], 0)},
		{interval(rec)}, // before HELLO
		{hello(""), hello("")},
		{hello(""), append(hello(""), make([]byte, appio.MaxMessage)...)},
		{hello(""), appio.AppendFile(nil, appio.File{ID: 1, Path: "relative"})},
	}
	for i, msgs := range bad {
		c := dial(t, p)
		c.send(msgs...)
		if !c.closedByPeer() {
			t.Fatalf("bad client %d not closed", i)
		}
		good.send(interval(rec))
		want := uint64(i + 1)
		waitRecords(t, p, want)
	}
	m := sample(t, p, time.Now())
	if m["vigil_appio_rejected_total{reason=protocol}"] != float64(len(bad)) {
		t.Errorf("rejected %v, want %d", m["vigil_appio_rejected_total{reason=protocol}"], len(bad))
	}
	if m[series("5", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write")] != float64(len(bad)) {
		t.Errorf("good client's writes %v", m)
	}
	// Unknown message types are skipped, also before HELLO.
	unk := appio.AppendBye(nil)
	unk[6] = 77
	good.send(unk, interval(rec))
	early := dial(t, p)
	zero := appio.AppendBye(nil)
	zero[6] = 0
	early.send(zero, unk, hello(""))
	waitFor(t, "a HELLO after unknown types", func() bool { return sample(t, p, time.Now())["vigil_appio_processes{jobid=5}"] == 2 })
	if p.rejBad.Load() != uint64(len(bad)) {
		t.Errorf("unknown types before HELLO closed the connection")
	}
	waitRecords(t, p, uint64(len(bad)+1))
}

// TestTickNeverWaits: while a connection holds the state (here: the test
// holds its lock) the tick sends its previous copy at once, and a client
// that connected and sends nothing costs the tick nothing.
func TestTickNeverWaits(t *testing.T) {
	p := newPlugin(t, fixture(t, map[int]string{os.Getpid(): "8"}), nil)
	dial(t, p) // connects and then sends nothing
	c := dial(t, p)
	rec := appio.Record{FileID: 1}
	rec.C[appio.Reads] = 1
	c.send(hello(""), file(1, "/scratch/x"), interval(rec))
	waitRecords(t, p, 1)
	before := sample(t, p, time.Now())
	p.mu.Lock()
	c.send(interval(rec)) // its goroutine now waits for the lock
	done := make(chan map[string]float64)
	go func() { done <- sample(t, p, time.Now()) }()
	select {
	case got := <-done:
		k := series("8", "/scratch", "lustre", "vigil_appio_calls_total", "op", "read")
		if got[k] != before[k] || got[k] != 1 {
			t.Errorf("tick under the lock: %v, want the previous copy %v", got[k], before[k])
		}
	case <-time.After(5 * time.Second):
		p.mu.Unlock()
		t.Fatal("the tick waited for the lock")
	}
	p.mu.Unlock()
	waitFor(t, "the second record", func() bool {
		return sample(t, p, time.Now())[series("8", "/scratch", "lustre", "vigil_appio_calls_total", "op", "read")] == 2
	})
}

// TestGrace: a job whose processes have all gone keeps its series for the
// grace period, then they end.
func TestGrace(t *testing.T) {
	p := newPlugin(t, fixture(t, map[int]string{os.Getpid(): "9"}), nil)
	c := dial(t, p)
	rec := appio.Record{FileID: 1}
	rec.C[appio.Writes] = 3
	c.send(hello(""), file(1, "/scratch/x"), interval(rec), appio.AppendBye(nil))
	waitRecords(t, p, 1)
	c.c.Close()
	waitFor(t, "the disconnect", func() bool { return p.nConns.Load() == 0 })
	k := series("9", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write")
	m := sample(t, p, time.Now().Add(time.Duration(p.cfg.Grace)-time.Second))
	if m[k] != 3 || m["vigil_appio_processes{jobid=9}"] != 0 {
		t.Errorf("within the grace period: %v", m)
	}
	m = sample(t, p, time.Now().Add(time.Duration(p.cfg.Grace)+time.Second))
	if len(m) != nSelf || m["vigil_appio_jobs{}"] != 0 {
		t.Errorf("after the grace period: %v", m)
	}
}

// TestCaps folds jobs, mount points and files beyond their caps into
// "other", counted.
func TestCaps(t *testing.T) {
	self := os.Getpid()
	cfg := DefaultConfig()
	cfg.MaxJobs, cfg.MaxMounts, cfg.MaxFilesPerJob = 1, 1, 2
	cfg.IOFSUIDs = []uint32{uint32(os.Getuid())}
	p := newPlugin(t, fixture(t, map[int]string{self: "1", 100: "2"}), cfg)
	c := dial(t, p)
	rec := func(file, pid uint32) appio.Record {
		r := appio.Record{FileID: file, PID: pid}
		r.C[appio.Writes] = 1
		return r
	}
	c.send(hello(""), file(1, "/scratch/a"), file(2, "/home/b"), file(3, "/scratch/c"),
		interval(rec(1, 0), rec(2, 0), rec(3, 0), rec(1, 100)))
	waitRecords(t, p, 4)
	m := sample(t, p, time.Now())
	want := map[string]float64{
		series("1", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write"):     1,
		series("1", "other", "", "vigil_appio_calls_total", "op", "write"):              2, // /home over max_mounts, file 3 over max_files_per_job
		series("other", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write"): 1,
		"vigil_appio_folded_records_total{reason=mount}":                                1,
		"vigil_appio_folded_records_total{reason=file}":                                 1,
		"vigil_appio_folded_records_total{reason=job}":                                  1,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
}

// TestSocket: a stale socket file is replaced, a live one (another
// sampler's) is left alone, and a socket that cannot be made leaves a
// plugin that reports nothing and does not fail.
func TestSocket(t *testing.T) {
	root := fixture(t, nil)
	path := filepath.Join(root, "run/vigil/appio.sock")
	os.MkdirAll(filepath.Dir(path), 0o755)
	stale, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	p := newPlugin(t, root, nil)
	if !p.listening.Load() {
		t.Fatal("stale socket not replaced")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode: %v %v", fi, err)
	}
	q := newPlugin(t, root, nil)
	if q.listening.Load() {
		t.Error("a second plugin took over a live socket")
	}
	dial(t, p).send(hello(""))
	waitFor(t, "the first plugin's connection", func() bool { return p.nConns.Load() == 1 })
	q.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("closing the second plugin removed the first one's socket: %v", err)
	}
	p.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}

	// A file where the directory should be: no socket, nothing reported.
	bad := fixture(t, nil)
	write(t, filepath.Join(bad, "run"), "not a directory")
	r := newPlugin(t, bad, nil)
	var b metric.Batch
	if err := r.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) || b.Len() != 0 {
		t.Errorf("without a socket: %v, %d samples", err, b.Len())
	}
}

// TestSocketRemade: a socket removed from under the sampler (a /run
// clean-up) is made again at the next rescan.
func TestSocketRemade(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Rescan = sampler.Duration(100 * time.Millisecond)
	p := newPlugin(t, fixture(t, nil), cfg)
	os.Remove(p.path)
	var c *net.UnixConn
	waitFor(t, "a new socket", func() bool {
		var err error
		c, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: p.path, Net: "unixpacket"})
		return err == nil
	})
	t.Cleanup(func() { c.Close() })
	(&client{t, c}).send(hello(""))
	waitFor(t, "a connection to it", func() bool { return p.nConns.Load() == 1 })
}

func TestZeroAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p := newPlugin(t, fixture(t, map[int]string{os.Getpid(): "3"}), nil)
	c := dial(t, p)
	rec := appio.Record{FileID: 1}
	rec.C[appio.Writes] = 1
	c.send(hello(""), file(1, "/scratch/a"), file(2, "/home/b"), interval(rec))
	waitRecords(t, p, 1)
	if n := testutil.AllocsPerTick(t, p); n != 0 {
		t.Errorf("allocs per tick = %v, want 0", n)
	}
}

func TestMountinfo(t *testing.T) {
	tab := mountTable{mounts: parseMountinfo([]byte(mountinfo + "bad line\n40 22 0:50 / /scratch rw - ext4 /dev/x rw\n"))}
	for path, want := range map[string]string{
		"/scratch/u/f":       "/scratch ext4", // mounted over: the later line wins
		"/scratchy":          "/ ext4",
		"/home/with space/f": "/home/with space tmpfs",
		"/home/with spaceX":  "/home nfs4",
		"/home":              "/home nfs4",
		"/":                  "/ ext4",
	} {
		m, ok := tab.lookup(path)
		if got := m.point + " " + m.fstype; !ok || got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if _, ok := (&mountTable{}).lookup("/x"); ok {
		t.Error("empty table matched")
	}
	if got := unescape([]byte(`/a\134b\011c\12`)); got != "/a\\b\tc\\12" {
		t.Errorf("unescape: %q", got)
	}
	if !bytes.Contains([]byte(labelSafe("\xff")), []byte("\uFFFD")) {
		t.Error("invalid UTF-8 kept")
	}
}

func TestValidate(t *testing.T) {
	for name, f := range map[string]func(c *Config){
		"relative socket": func(c *Config) { c.Socket = "run/x.sock" },
		"max_conns 0":     func(c *Config) { c.MaxConns = 0 },
		"max_jobs huge":   func(c *Config) { c.MaxJobs = 1 << 20 },
		"grace negative":  func(c *Config) { c.Grace = -1 },
		"rescan 0":        func(c *Config) { c.Rescan = 0 },
	} {
		c := DefaultConfig()
		f(c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
}

// TestManyClients: concurrent clients' records all add up, exactly.
func TestManyClients(t *testing.T) {
	const clients, intervals = 32, 40
	p := newPlugin(t, fixture(t, map[int]string{os.Getpid(): "6"}), nil)
	rec := appio.Record{FileID: 1}
	rec.C[appio.Writes], rec.C[appio.BytesWritten], rec.C[appio.WriteNS] = 3, 3000, 7
	done := make(chan struct{})
	for i := 0; i < clients; i++ {
		c := dial(t, p)
		go func() {
			defer func() { done <- struct{}{} }()
			for _, m := range [][]byte{hello(""), file(1, fmt.Sprintf("/scratch/f%d", i))} {
				if _, err := c.c.Write(m); err != nil {
					t.Error(err)
					return
				}
			}
			for range intervals {
				if _, err := c.c.Write(interval(rec)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range clients {
		<-done
	}
	waitRecords(t, p, clients*intervals)
	m := sample(t, p, time.Now())
	n := float64(clients * intervals)
	for k, v := range map[string]float64{
		series("6", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write"):   3 * n,
		series("6", "/scratch", "lustre", "vigil_appio_bytes_total", "op", "write"):   3000 * n,
		series("6", "/scratch", "lustre", "vigil_appio_seconds_total", "op", "write"): 7 * n / 1e9,
		"vigil_appio_processes{jobid=6}":                                              clients,
	} {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if len(p.Recent()) != min(clients*intervals, p.cfg.RecentRecords) {
		t.Errorf("%d recent records", len(p.Recent()))
	}
}

// TestMountsReloaded: a file system mounted after the start is known
// from the next rescan on.
func TestMountsReloaded(t *testing.T) {
	root := fixture(t, map[int]string{os.Getpid(): "2"})
	cfg := DefaultConfig()
	cfg.Rescan = sampler.Duration(100 * time.Millisecond)
	p := newPlugin(t, root, cfg)
	write(t, filepath.Join(root, "proc/self/mountinfo"), mountinfo+"50 22 0:60 / /data rw - xfs /dev/sdb rw\n")
	waitFor(t, "the new mount table", func() bool {
		m, ok := p.mounts.Load().lookup("/data/x")
		return ok && m.point == "/data"
	})
	c := dial(t, p)
	rec := appio.Record{FileID: 1}
	rec.C[appio.Reads] = 1
	c.send(hello(""), file(1, "/data/x"), interval(rec))
	waitRecords(t, p, 1)
	if v := sample(t, p, time.Now())[series("2", "/data", "xfs", "vigil_appio_calls_total", "op", "read")]; v != 1 {
		t.Errorf("read on the new mount: %v", v)
	}
}

// TestGolden renders the series of a scripted session (two processes of
// job 4242 writing to /scratch and reading from /home, one reading in no
// job) as /metrics shows them: testdata/session.want.txt (-update).
func TestGolden(t *testing.T) {
	self := os.Getpid()
	root := fixture(t, map[int]string{self: "4242", 4711: ""})
	cfg := DefaultConfig()
	cfg.IOFSUIDs = []uint32{uint32(os.Getuid())}
	p := newPlugin(t, root, cfg)
	w := appio.Record{FileID: 1}
	w.C[appio.Opens], w.C[appio.Closes], w.C[appio.Writes], w.C[appio.BytesWritten] = 1, 1, 4, 4<<20
	w.C[appio.WriteNS], w.C[appio.MetaNS], w.C[appio.SeqAccesses], w.C[appio.RandomAccesses] = 2_000_000, 30_000, 3, 0
	w.C[appio.WriteHist+4] = 4
	r := appio.Record{FileID: 2}
	r.C[appio.Opens], r.C[appio.Reads], r.C[appio.BytesRead], r.C[appio.ReadNS], r.C[appio.Stats] = 1, 10, 5000, 90_000, 2
	r.C[appio.ReadHist+2] = 10
	a, b := dial(t, p), dial(t, p)
	a.send(hello("4242"), file(1, "/scratch/run/ckpt.0"), interval(w))
	b.send(hello(""), file(1, "/scratch/run/ckpt.1"), file(2, "/home/u/input.nml"), interval(w, r))
	iofs := r
	iofs.PID = 4711
	waitRecords(t, p, 3)
	c := dial(t, p)
	c.send(hello(""), appio.AppendFile(nil, appio.File{ID: 2, Flags: appio.FlagIOFS, PID: 4711, Path: "/home/v/data"}), interval(iofs))
	waitRecords(t, p, 4)
	var batch metric.Batch
	now := time.Now()
	batch.Reset(now)
	if err := p.Sample(context.Background(), now, &batch); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "testdata/session.want.txt", testutil.Render(t, &batch))
}

// TestFloodDoesNotFreezeSeries: while clients send records as fast as
// they can, ticks still see them grow: a tick that found the state held
// is let in by the connections before the next one.
func TestFloodDoesNotFreezeSeries(t *testing.T) {
	p := newPlugin(t, fixture(t, map[int]string{os.Getpid(): "7"}), nil)
	recs := make([]appio.Record, appio.MaxRecords)
	for i := range recs {
		recs[i].FileID = 1
		recs[i].C[appio.Writes] = 1
	}
	msg := interval(recs...)
	stop := make(chan struct{})
	done := make(chan struct{})
	const clients = 4
	for range clients {
		c := dial(t, p)
		c.send(hello(""), file(1, "/scratch/x"))
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.c.Write(msg); err != nil && !isTimeout(err) {
					return
				}
			}
		}()
	}
	k := series("7", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write")
	const ticks = 40
	fresh, last := 0, -1.0
	for range ticks {
		time.Sleep(10 * time.Millisecond)
		if v := sample(t, p, time.Now())[k]; v != last {
			fresh++
			last = v
		}
	}
	close(stop)
	for range clients {
		<-done
	}
	t.Logf("%d of %d ticks saw new values, %d stale", fresh, ticks, p.stale.Load())
	if fresh < ticks/3 {
		t.Errorf("only %d of %d ticks under a flood saw new values", fresh, ticks)
	}
}

// TestStarvedTickGoesFirst: after a tick found the state held, the
// connections wait for the next tick before they add more.
func TestStarvedTickGoesFirst(t *testing.T) {
	p := newPlugin(t, fixture(t, map[int]string{os.Getpid(): "7"}), nil)
	c := dial(t, p)
	rec := appio.Record{FileID: 1}
	rec.C[appio.Writes] = 1
	c.send(hello(""), file(1, "/scratch/x"), interval(rec))
	waitRecords(t, p, 1)
	p.mu.Lock()
	sample(t, p, time.Now()) // finds it held
	p.mu.Unlock()
	if !p.starved.Load() || p.stale.Load() != 1 {
		t.Fatalf("starved %v, stale %d after a tick found the lock held", p.starved.Load(), p.stale.Load())
	}
	c.send(interval(rec))
	time.Sleep(100 * time.Millisecond)
	if n := p.nRecords.Load(); n != 1 {
		t.Fatalf("a connection added a record (%d) before the starved tick", n)
	}
	k := series("7", "/scratch", "lustre", "vigil_appio_calls_total", "op", "write")
	if v := sample(t, p, time.Now())[k]; v != 1 {
		t.Errorf("tick after starving: %v, want 1", v)
	}
	waitRecords(t, p, 2)
	if v := sample(t, p, time.Now())[k]; v != 2 {
		t.Errorf("after the connection went on: %v, want 2", v)
	}
}

// TestCountersRestart: a job's series never restart while the sampler
// runs. A second connection of the same process (the library restarted or
// reconnected) adds to the totals; so does a new process of the job after
// the first one left and the grace period ended (the series pause, then
// resume from their totals). Retired jobs are bounded by max_jobs.
func TestCountersRestart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxJobs = 2
	root := fixture(t, map[int]string{os.Getpid(): "9"})
	p := newPlugin(t, root, cfg)
	k := series("9", "/scratch", "lustre", "vigil_appio_bytes_total", "op", "write")
	send := func(n uint64, want uint64, now time.Time) {
		t.Helper()
		c := dial(t, p)
		rec := appio.Record{FileID: 1}
		rec.C[appio.Writes], rec.C[appio.BytesWritten] = 1, n
		before := p.nRecords.Load()
		c.send(hello(""), file(1, "/scratch/x"), interval(rec), appio.AppendBye(nil))
		waitRecords(t, p, before+1)
		c.c.Close()
		waitFor(t, "the disconnect", func() bool { return p.nConns.Load() == 0 })
		if got := sample(t, p, now)[k]; got != float64(want) {
			t.Fatalf("after %d more bytes: %s = %v, want %v", n, k, got, want)
		}
	}
	grace := time.Duration(p.cfg.Grace)
	send(100, 100, time.Now())
	send(20, 120, time.Now()) // the library reconnected: a new connection, new file ids
	if m := sample(t, p, time.Now().Add(grace+time.Second)); m["vigil_appio_jobs{}"] != 0 {
		t.Fatalf("the job outlived its grace: %v", m)
	}
	send(3, 123, time.Now()) // a later process of the job
	// Two other jobs come and go; with max_jobs 2 the longest idle
	// retired one is dropped.
	for _, id := range []string{"70", "71"} {
		write(t, filepath.Join(root, "proc", fmt.Sprint(os.Getpid()), "cgroup"), "0::/slurmstepd.scope/job_"+id+"/step_0\n")
		c := dial(t, p)
		c.send(hello(""))
		waitFor(t, "job "+id, func() bool { _, ok := sample(t, p, time.Now())["vigil_appio_processes{jobid="+id+"}"]; return ok })
		c.c.Close()
		waitFor(t, "the disconnect", func() bool { return p.nConns.Load() == 0 })
		sample(t, p, time.Now().Add(grace+time.Second))
	}
	p.mu.Lock()
	n, kept := len(p.retired), p.retired["9"] == nil
	p.mu.Unlock()
	if n != 2 || !kept {
		t.Fatalf("%d retired jobs, job 9 dropped %v; want 2, job 9 (the longest idle) dropped", n, kept)
	}
}
