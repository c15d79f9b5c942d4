package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// fullDescs are a node's series in the disk-full tests: enough that a
// tick's WAL record is larger than a 32 KiB WAL page, so a write failing
// at a page boundary tears the record.
var fullDescs = func() []*metric.Desc {
	ds := make([]*metric.Desc, 4000)
	for i := range ds {
		ds[i] = metric.NewDesc("node_test_value", "Test.", metric.Gauge, "i", fmt.Sprint(i))
	}
	return ds
}()

// tickValues are tick k's values: distinct per tick and series, and noisy
// enough that the WAL cannot compress them away.
func tickValues(k int) []float64 {
	vs := make([]float64, len(fullDescs))
	for i := range vs {
		vs[i] = float64(k)*1000.123 + float64(i)*7.77 + float64((k*7919+i*104729)%1000003)
	}
	return vs
}

func tickTime(k int) time.Time { return base.Add(time.Duration(k) * time.Second) }

// checkTicks fails unless every tick in acked is stored with its values.
func checkTicks(t *testing.T, s *Store, node string, acked []int) {
	t.Helper()
	got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "node_test_value"),
		labels.MustNewMatcher(labels.MatchEqual, NodeLabel, node))
	byT := map[string]map[int64]float64{}
	for k, ps := range got {
		m := map[int64]float64{}
		for _, p := range ps {
			m[p.T] = p.V
		}
		byT[k] = m
	}
	lost := 0
	for _, k := range acked {
		vs := tickValues(k)
		for i, d := range fullDescs {
			key := labels.FromStrings(labels.MetricName, d.Name, NodeLabel, node, "i", d.Labels[0].Value).String()
			v, ok := byT[key][tickTime(k).UnixMilli()]
			if !ok || v != vs[i] {
				lost++
				if lost < 5 {
					t.Errorf("acknowledged tick %d of %s: series %s = %v, %v; want %v", k, node, key, v, ok, vs[i])
				}
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d acknowledged samples missing or wrong", lost)
	}
}

func TestDiskFullTornWALKeepsAcknowledged(t *testing.T) {
	dir := testutil.TmpFS(t, 24<<20)
	opts := Options{Dir: dir, MinFreeBytes: -1, CheckInterval: time.Hour}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	filler := testutil.Fill(t, dir, "filler")
	// Leave room for a few ticks, so the WAL fills up mid-record.
	st, _ := os.Stat(filler)
	if err := os.Truncate(filler, st.Size()-1<<20); err != nil {
		t.Fatal(err)
	}
	var acked []int
	k := 0
	for ; k < 10000; k++ {
		err = s.AppendTick("cn01", tickTime(k), fullDescs, tickValues(k), false)
		if err != nil {
			break
		}
		acked = append(acked, k)
	}
	t.Logf("%d ticks acknowledged before: %v", len(acked), err)
	var nw *NotWritableError
	if !errors.As(err, &nw) || !errors.Is(err, ErrNotWritable) || nw.Reason != "disk_full" {
		t.Fatalf("append on a full disk: %v, want a disk_full NotWritableError", err)
	}
	if err := s.AppendTick("cn01", tickTime(k+1), fullDescs, tickValues(k+1), false); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("append after a failed write: %v, want ErrNotWritable", err)
	}
	checkTicks(t, s, "cn01", acked) // still readable
	k += 2
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.check() // reopens
	if err := s.Writable(); err != nil {
		t.Fatalf("after space returned: %v", err)
	}
	for end := k + 100; k < end; k++ {
		if err := s.AppendTick("cn01", tickTime(k), fullDescs, tickValues(k), false); err != nil {
			out, _ := exec.Command("sh", "-c", "df -k "+dir+"; ls -laR "+dir).CombinedOutput()
			t.Fatalf("append after recovery: %v\n%s", err, out)
		}
		acked = append(acked, k)
	}
	checkTicks(t, s, "cn01", acked)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkTicks(t, s, "cn01", acked)
}

func TestRestartWhileDiskFull(t *testing.T) {
	dir := testutil.TmpFS(t, 24<<20)
	opts := Options{Dir: dir, MinFreeBytes: -1, CheckInterval: time.Hour}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	var acked []int
	for k := range 20 {
		if err := s.AppendTick("cn01", tickTime(k), fullDescs, tickValues(k), false); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, k)
	}
	filler := testutil.Fill(t, dir, "filler")
	for k := 20; k < 30; k++ {
		if err := s.AppendTick("cn01", tickTime(k), fullDescs, tickValues(k), false); err == nil {
			acked = append(acked, k)
		}
	}
	if err := s.Close(); err != nil {
		t.Logf("close on a full disk: %v", err)
	}
	opts.MinFreeBytes = 1 << 20
	s, err = Open(opts)
	if err != nil {
		t.Fatalf("open on a full disk: %v", err)
	}
	defer s.Close()
	if err := s.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("store opened on a full disk says writable: %v", err)
	}
	checkTicks(t, s, "cn01", acked)
	if err := s.AppendTick("cn01", tickTime(40), fullDescs, tickValues(40), false); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("append on a full disk: %v, want ErrNotWritable", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.check()
	if err := s.Writable(); err != nil {
		t.Fatalf("after space returned: %v", err)
	}
	if err := s.AppendTick("cn01", tickTime(41), fullDescs, tickValues(41), false); err != nil {
		t.Fatal(err)
	}
	checkTicks(t, s, "cn01", append(acked, 41))
}

// lastSegment returns the path of the last WAL segment holding data.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	last := ""
	for _, e := range es {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := strconv.Atoi(e.Name()); err == nil && fi.Size() > 0 {
			last = filepath.Join(dir, "wal", e.Name())
		}
	}
	if last == "" {
		t.Fatal("no WAL segment with data")
	}
	return last
}

// tornStore writes ticks 0..n-1 and closes, then appends the start of a
// record whose rest never made it to the last segment, as a write that
// ran out of space leaves it.
func tornStore(t *testing.T, dir string, n int) (seg string, acked []int) {
	t.Helper()
	s, err := Open(Options{Dir: dir, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	for k := range n {
		if err := s.AppendTick("cn01", tickTime(k), fullDescs, tickValues(k), false); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, k)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg = lastSegment(t, dir)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	part := []byte("the first part of a record")
	whole := append(part, make([]byte, 100)...)
	hdr := []byte{1 /* full record */, 0, byte(len(whole)), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[3:], crc32.Checksum(whole, crc32.MakeTable(crc32.Castagnoli))+1)
	if _, err := f.Write(append(hdr, part...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return seg, acked
}

func TestTornWALTailCutKeepsEarlierRecords(t *testing.T) {
	dir := t.TempDir()
	seg, acked := tornStore(t, dir, 30)
	before, _ := os.Stat(seg)
	s := openT(t, dir)
	defer s.Close()
	checkTicks(t, s, "cn01", acked)
	after, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() >= before.Size() {
		t.Errorf("segment %s: %d bytes after repair, %d before: torn tail not cut", seg, after.Size(), before.Size())
	}
}

// The TSDB's own repair moves the segment to NAME.repair and copies its
// records into a new NAME; a full disk stops it half-way. The records
// only in NAME.repair must come back.
func TestInterruptedTSDBRepairRestored(t *testing.T) {
	dir := t.TempDir()
	seg, acked := tornStore(t, dir, 30)
	if err := os.Rename(seg, seg+".repair"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, nil, 0o644); err != nil { // copied nothing yet
		t.Fatal(err)
	}
	s := openT(t, dir)
	defer s.Close()
	checkTicks(t, s, "cn01", acked)
}

func TestOpenOnFullDiskWithTornWAL(t *testing.T) {
	dir := testutil.TmpFS(t, 24<<20)
	_, acked := tornStore(t, dir, 30)
	testutil.Fill(t, dir, "filler")
	s, err := Open(Options{Dir: dir, MinFreeBytes: 1 << 20})
	if err != nil {
		t.Fatalf("open on a full disk with a torn WAL: %v", err)
	}
	defer s.Close()
	if err := s.Writable(); !errors.Is(err, ErrNotWritable) {
		t.Errorf("store on a full disk says writable: %v", err)
	}
	checkTicks(t, s, "cn01", acked)
}

// waitFor polls cond every few milliseconds for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestLowFreeSpaceReadOnlyThenResumes(t *testing.T) {
	dir := testutil.TmpFS(t, 24<<20)
	reg := prometheus.NewRegistry()
	s, err := Open(Options{Dir: dir, MinFreeBytes: 8 << 20, CheckInterval: 10 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AppendTick("cn01", tickTime(0), fullDescs, tickValues(0), false); err != nil {
		t.Fatal(err)
	}
	filler := testutil.Fill(t, dir, "filler")
	st, _ := os.Stat(filler)
	if err := os.Truncate(filler, st.Size()-4<<20); err != nil { // 4 MiB left: writes would still work
		t.Fatal(err)
	}
	waitFor(t, "read-only", func() bool { return s.Writable() != nil })
	var nw *NotWritableError
	if err := s.AppendTick("cn01", tickTime(1), fullDescs, tickValues(1), false); !errors.As(err, &nw) || nw.Reason != "disk_full" {
		t.Fatalf("append below min free: %v, want a disk_full NotWritableError", err)
	}
	if err := s.SetUp("cn01", tickTime(1), false); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("SetUp below min free: %v", err)
	}
	if err := s.Gap("cn01", tickTime(1), tickTime(2)); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Gap below min free: %v", err)
	}
	app := s.Appender(context.Background())
	if _, err := app.Append(0, labels.FromStrings("__name__", "x"), tickTime(1).UnixMilli(), 1); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Appender below min free: %v", err)
	}
	_ = app.Rollback()
	if v := promtest.ToFloat64(s.dur.wgauge); v != 0 {
		t.Errorf("vigil_store_writable = %v while read-only", v)
	}
	if v := promtest.ToFloat64(s.dur.failures.WithLabelValues("not_writable")); v != 4 {
		t.Errorf("not_writable failures = %v, want 4", v)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "writable", func() bool { return s.Writable() == nil })
	if err := s.AppendTick("cn01", tickTime(3), fullDescs, tickValues(3), false); err != nil {
		t.Fatal(err)
	}
	checkTicks(t, s, "cn01", []int{0, 3})
	if v := promtest.ToFloat64(s.dur.wgauge); v != 1 {
		t.Errorf("vigil_store_writable = %v after recovery", v)
	}
	if n, err := promtest.GatherAndCount(reg, "vigil_store_writable", "vigil_store_free_bytes", "vigil_store_append_failures_total", "vigil_store_reopens_total"); err != nil || n != 6 {
		t.Errorf("registered metrics: %d series, %v; want 6", n, err)
	}
}

// failingAppender fails its commit as a WAL write on a full disk does.
type failingAppender struct{ storage.Appender }

func (failingAppender) Commit() error {
	return fmt.Errorf("write to WAL: log samples: write wal/00000003: %w", syscall.ENOSPC)
}
func (failingAppender) Rollback() error { return nil }

// Without root (no tmpfs): an injected failing commit makes the store
// read-only until it is reopened, and a commit that waited meanwhile does
// not go through.
func TestInjectedCommitFailure(t *testing.T) {
	reg := prometheus.NewRegistry() // the reopened TSDB registers its metrics again
	s, err := Open(Options{Dir: t.TempDir(), MinFreeBytes: -1, CheckInterval: time.Hour, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AppendTick("cn01", tickTime(0), fullDescs, tickValues(0), false); err != nil {
		t.Fatal(err)
	}
	g := s.gen.Load()
	late := s.Appender(context.Background()) // begun before the failure
	if _, err := late.Append(0, labels.FromStrings("__name__", "late"), tickTime(1).UnixMilli(), 1); err != nil {
		t.Fatal(err)
	}
	var nw *NotWritableError
	if err := s.commit(failingAppender{}, g); !errors.As(err, &nw) || nw.Reason != "disk_full" {
		t.Fatalf("failed commit: %v, want a disk_full NotWritableError", err)
	}
	if err := late.Commit(); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("commit after a failed one: %v, want ErrNotWritable", err)
	}
	if err := s.AppendTick("cn01", tickTime(2), fullDescs, tickValues(2), false); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("append after a failed commit: %v", err)
	}
	if v := promtest.ToFloat64(s.dur.failures.WithLabelValues("disk_full")); v != 1 {
		t.Errorf("disk_full failures = %v, want 1", v)
	}
	s.check()
	if err := s.Writable(); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
	if v := promtest.ToFloat64(s.dur.reopens); v != 1 {
		t.Errorf("reopens = %v, want 1", v)
	}
	if err := s.AppendTick("cn01", tickTime(3), fullDescs, tickValues(3), false); err != nil {
		t.Fatal(err)
	}
	checkTicks(t, s, "cn01", []int{0, 3})
	// The TSDB's metrics are the reopened one's, not the closed one's.
	want := fmt.Sprintf("# HELP prometheus_tsdb_head_series Total number of series in the head block.\n# TYPE prometheus_tsdb_head_series gauge\nprometheus_tsdb_head_series %d\n", s.tdb().Head().NumSeries())
	if err := promtest.GatherAndCompare(reg, strings.NewReader(want), "prometheus_tsdb_head_series"); err != nil {
		t.Errorf("TSDB metrics after reopening: %v", err)
	}
	if got := readAll(t, s, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "late")); len(got) != 0 {
		t.Errorf("refused commit stored: %v", got)
	}
}

// The read-only state is logged once, not on every check while the free
// space (part of the message) moves.
func TestReadOnlyLoggedOnce(t *testing.T) {
	var buf testutil.SyncBuffer
	s, err := Open(Options{Dir: t.TempDir(), MinFreeBytes: 1 << 62, CheckInterval: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		s.check()
		if err := os.WriteFile(filepath.Join(s.opts.Dir, "grow"), make([]byte, 4096*(1+len(buf.String()))), 0o644); err != nil {
			t.Fatal(err) // moves the free space a little
		}
	}
	if n := strings.Count(buf.String(), "store read-only"); n != 1 {
		t.Errorf("read-only logged %d times, want once:\n%s", n, buf.String())
	}
}

// TestConcurrentCommitAfterWALFailure: commits run concurrently, so one
// that wrote after another's failed WAL write (which the TSDB counts) is
// not acknowledged, and the store turns read-only until it is reopened.
func TestConcurrentCommitAfterWALFailure(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), MinFreeBytes: -1, CheckInterval: time.Hour, OutOfOrderWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The failure counters are found: the WAL's and the out-of-order WBL's.
	reg := s.currentTSDBRegisterer()
	reg.mu.Lock()
	n := 0
	for _, c := range reg.cs {
		descs := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			for _, name := range walWriteFailureMetrics {
				if strings.Contains(d.String(), name) {
					n++
				}
			}
		}
	}
	reg.mu.Unlock()
	if n != 2 {
		t.Fatalf("found %d WAL/WBL write-failure counters, want 2", n)
	}
	if err := s.AppendTick("cn01", tickTime(0), fullDescs, tickValues(0), false); err != nil {
		t.Fatal(err)
	}
	// As if another commit, still in flight, had failed its WAL write
	// since the open.
	g := s.gen.Load()
	g.walBase--
	s.dur.inflight.Add(1)
	err = s.AppendTick("cn01", tickTime(1), fullDescs, tickValues(1), false)
	s.dur.inflight.Add(-1)
	if !errors.Is(err, ErrNotWritable) {
		t.Fatalf("commit after another's WAL failure: %v, want ErrNotWritable", err)
	}
	if err := s.Writable(); err == nil {
		t.Fatal("store still writable after a WAL failure")
	}
	s.check() // reopens
	if err := s.AppendTick("cn01", tickTime(2), fullDescs, tickValues(2), false); err != nil {
		t.Fatalf("after reopening: %v", err)
	}
}

// TestDiskFullConcurrentKeepsAcknowledged: four nodes commit at once while
// the disk fills; every tick acknowledged before the failure survives
// recovery and a restart, though commits no longer wait for each other.
func TestDiskFullConcurrentKeepsAcknowledged(t *testing.T) {
	dir := testutil.TmpFS(t, 24<<20)
	opts := Options{Dir: dir, MinFreeBytes: -1, CheckInterval: time.Hour}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	filler := testutil.Fill(t, dir, "filler")
	st, _ := os.Stat(filler)
	if err := os.Truncate(filler, st.Size()-1<<20); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"cn01", "cn02", "cn03", "cn04"}
	acked := make([][]int, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 10000; k++ {
				if err := s.AppendTick(node, tickTime(k), fullDescs, tickValues(k), false); err != nil {
					if !errors.Is(err, ErrNotWritable) {
						t.Errorf("%s: %v, want ErrNotWritable", node, err)
					}
					return
				}
				acked[i] = append(acked[i], k)
			}
		}()
	}
	wg.Wait()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.check() // reopens
	for i, node := range nodes {
		k := 20000
		if err := s.AppendTick(node, tickTime(k), fullDescs, tickValues(k), false); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		acked[i] = append(acked[i], k)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, node := range nodes {
		t.Logf("%s: %d ticks acknowledged", node, len(acked[i]))
		checkTicks(t, s, node, acked[i])
	}
}
