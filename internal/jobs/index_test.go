package jobs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"
)

func sampleJob(id string) *Job {
	start := time.Date(2026, 11, 25, 10, 0, 0, 123e6, time.UTC)
	return &Job{
		ID: id, User: "alice", Account: "phys", Partition: "batch", Name: "lattice qcd",
		Nodes: []string{"cn0411", "cn0412"}, CPUs: 64, MemBytes: 64 << 30, GPUs: 2,
		TimeLimit: Duration(4 * time.Hour), Submit: start.Add(-90 * time.Second), Start: start,
		End: start.Add(3*time.Hour + 7*time.Second), State: StateCompleted, ExitCode: 3,
		Summary: &Summary{
			CPUEfficiency: 0.8125, MemUsedPeak: 4 << 30, MemEfficiency: 0.0625, ReadBytes: 1 << 40, WriteBytes: 12345,
			PerNode: []NodeSummary{
				{Node: "cn0411", CPUEfficiency: 0.95, MemUsedPeak: 2 << 30, ReadBytes: 1 << 39, WriteBytes: 1},
				{Node: "cn0412", CPUEfficiency: 0.675, MemUsedPeak: 2 << 30, ReadBytes: 1 << 39, WriteBytes: 12344},
			},
			Stragglers: []string{"cn0412"},
			Notes:      []string{"used 6 % of the 64 GiB asked: ask for 8 GiB next time"},
			AppIO: []AppIOFS{{Mountpoint: "/scratch", FSType: "lustre", ReadBytes: 1 << 33, WriteBytes: 12 << 30,
				Calls: [len(AppIOCallOps)]int64{1, 1, 100, 240000, 0, 2, 5, 0, 3}, ReadSeconds: 1.5, WriteSeconds: 60.25, MetaSeconds: 0.001,
				Sequential: 240050, Random: 50, ReadSizes: [AppIOBuckets]int64{0, 0, 0, 0, 100}, WriteSizes: [AppIOBuckets]int64{0, 240000}}},
			Energy: &Energy{Joules: 348012.5, NodeJoules: 696025, Shared: true, Folded: 3, MissingFolded: 1,
				Nodes: []NodeEnergy{
					{Node: "cn0411", Joules: 174006.25, NodeJoules: 348012.5, Share: 0.5, Source: "rapl"},
					{Node: "cn0999", Joules: 174006.25, NodeJoules: 348012.5, Share: 0.5, Source: "hwmon_power"},
				},
				Missing: []string{"cn0412"}},
			Lustre: []LustreFS{{FS: "scratch", ReadBytes: 1 << 40, WriteBytes: 3 << 30, Reads: 1e6, Writes: 3072, MetadataOps: 17, OSTOps: 2, OSTs: 8, MDTs: 1},
				{FS: "home", Reads: 1, MDTs: 2}},
		},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, j := range []*Job{sampleJob("1234"), {ID: "7_3", State: StateRunning}, {ID: "9", State: StatePending, Submit: time.UnixMilli(1).UTC(), ExitCode: -1}} {
		b := appendJob(nil, j)
		got, err := decodeJob(b, nil)
		if err != nil {
			t.Fatalf("%s: %v", j.ID, err)
		}
		if !reflect.DeepEqual(got, j) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", j.ID, got, j)
		}
		// Every truncation is an error, not a panic or a wrong job.
		for n := 0; n < len(b); n++ {
			if got, err := decodeJob(b[:n], nil); err == nil {
				t.Fatalf("%s cut at %d of %d decoded: %+v", j.ID, n, len(b), got)
			}
		}
	}
}

func openT(t testing.TB, dir string) *Index {
	t.Helper()
	x, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func TestIndexRoundTrip(t *testing.T) {
	dir := t.TempDir()
	x := openT(t, dir)
	want := sampleJob("100")
	running := *want
	running.State, running.End, running.Summary = StateRunning, time.Time{}, nil
	for _, j := range []*Job{&running, {ID: "101", User: "bob", State: StatePending}, want} {
		if err := x.Upsert(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	y := openT(t, dir)
	if y.Len() != 2 {
		t.Fatalf("%d jobs after reopening, want 2", y.Len())
	}
	got, err := y.Get("100")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Get(100) = %+v, %v; want the last record %+v", got, err, want)
	}
	if j, err := y.Get("999"); j != nil || err != nil {
		t.Fatalf("Get(999) = %v, %v; want nil, nil", j, err)
	}
	if err := y.Upsert(&Job{ID: "12; rm -rf /"}); err == nil {
		t.Fatal("a job id that is not Slurm's was stored")
	}
}

// TestIndexTornTail cuts the log at every byte of its last record (a
// crash mid-write): the records before it survive, the torn bytes are
// kept aside, and the index takes writes again.
func TestIndexTornTail(t *testing.T) {
	src := t.TempDir()
	x := openT(t, src)
	for i := range 3 {
		if err := x.Upsert(sampleJob(strconv.Itoa(i + 1))); err != nil {
			t.Fatal(err)
		}
	}
	full := x.Size()
	x.Close()
	whole, err := os.ReadFile(filepath.Join(src, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	recLen := full / 3
	for cut := full - recLen + 1; cut < full; cut += 7 {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, LogFile), whole[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		y := openT(t, dir)
		if y.Len() != 2 || y.Size() != full-recLen {
			t.Fatalf("cut at %d: %d jobs, %d bytes; want 2 jobs, %d bytes", cut, y.Len(), y.Size(), full-recLen)
		}
		aside, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s.bad-%d", LogFile, full-recLen)))
		if err != nil || len(aside) != int(cut-(full-recLen)) {
			t.Fatalf("cut at %d: torn tail kept aside: %d bytes, %v", cut, len(aside), err)
		}
		if err := y.Upsert(sampleJob("3")); err != nil {
			t.Fatal(err)
		}
		y.Close()
		z := openT(t, dir)
		if j, _ := z.Get("3"); z.Len() != 3 || j == nil {
			t.Fatalf("cut at %d: after a new write and reopen: %d jobs, job 3 %v", cut, z.Len(), j)
		}
	}
}

// TestIndexCorruptRecord flips a byte inside the first record: the log
// from there is moved aside, not deleted.
func TestIndexCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	x := openT(t, dir)
	for i := range 2 {
		if err := x.Upsert(sampleJob(strconv.Itoa(i + 1))); err != nil {
			t.Fatal(err)
		}
	}
	size := x.Size()
	x.Close()
	p := filepath.Join(dir, LogFile)
	b, _ := os.ReadFile(p)
	b[10] ^= 0xff
	os.WriteFile(p, b, 0o644)
	y := openT(t, dir)
	if y.Len() != 0 {
		t.Fatalf("%d jobs from a log whose first record is corrupt", y.Len())
	}
	aside, err := os.ReadFile(p + ".bad-0")
	if err != nil || int64(len(aside)) != size {
		t.Fatalf("kept aside: %d bytes (%v), want the whole %d", len(aside), err, size)
	}
}

func TestIndexCompaction(t *testing.T) {
	dir := t.TempDir()
	x := openT(t, dir)
	j := sampleJob("5")
	j.State = StateRunning
	for i := range 20000 { // ~2 MB of updates of one job
		j.ExitCode = i
		if err := x.Upsert(j); err != nil {
			t.Fatal(err)
		}
	}
	x.Upsert(sampleJob("6"))
	before := x.Size()
	x.Close()
	y := openT(t, dir)
	if y.Size() >= before/100 || y.Len() != 2 {
		t.Fatalf("after reopening: %d bytes (from %d), %d jobs; want compacted to 2 records", y.Size(), before, y.Len())
	}
	got, _ := y.Get("5")
	if got == nil || got.ExitCode != 19999 {
		t.Fatalf("job 5 after compaction: %+v", got)
	}
	if got, _ := y.Get("6"); !reflect.DeepEqual(got, sampleJob("6")) {
		t.Fatalf("job 6 after compaction: %+v", got)
	}
	if l, _ := y.List(Filter{}); len(l) != 2 || l[0].ID != "6" {
		t.Fatalf("order after compaction: %v", l)
	}
}

func TestIndexList(t *testing.T) {
	x := openT(t, t.TempDir())
	now := time.Now()
	add := func(id, user, part string, st State, end time.Time) {
		t.Helper()
		nodes := []string{"cn" + id, "cn9"} // every job on cn9 and on its own
		if err := x.Upsert(&Job{ID: id, User: user, Partition: part, State: st, Nodes: nodes, Start: now.Add(-time.Hour), End: end}); err != nil {
			t.Fatal(err)
		}
	}
	add("1", "alice", "batch", StateCompleted, now.Add(-10*24*time.Hour))
	add("2", "bob", "gpu", StateRunning, time.Time{})
	add("3", "alice", "gpu", StateEnded, now.Add(-time.Minute))
	add("4", "alice", "batch", StateRunning, time.Time{})
	add("5", "carol", "batch", StateFailed, now.Add(-2*time.Hour))
	add("2", "bob", "gpu", StateTimeout, now) // an update keeps its place
	ids := func(f Filter) string {
		l, err := x.List(f)
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		for _, j := range l {
			s += j.ID
		}
		return s
	}
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{}, "54321"},
		{Filter{User: "alice"}, "431"},
		{Filter{State: StateRunning}, "4"},
		{Filter{State: StateEnded}, "5321"},
		{Filter{State: StateTimeout}, "2"},
		{Filter{Partition: "gpu"}, "32"},
		{Filter{User: "alice", Partition: "batch"}, "41"},
		{Filter{Since: now.Add(-24 * time.Hour)}, "5432"},
		{Filter{Since: now.Add(-30 * time.Minute)}, "432"},
		{Filter{Limit: 2}, "54"},
		{Filter{User: "nobody"}, ""},
		{Filter{Node: "cn3"}, "3"},
		{Filter{Node: "cn9", User: "alice"}, "431"},
		{Filter{Node: "cn9", Limit: 2}, "54"},
		{Filter{Node: "cn7"}, ""},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("List(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
}

// TestIndexHugeJob: a 10,000-node job with its per-node summary is one
// record, read back whole; more nodes than MaxNodes are refused.
func TestIndexHugeJob(t *testing.T) {
	x := openT(t, t.TempDir())
	j := sampleJob("9000")
	j.Nodes = nil
	j.Summary.PerNode = nil
	for i := range 10000 {
		n := fmt.Sprintf("cn%05d", i)
		j.Nodes = append(j.Nodes, n)
		j.Summary.PerNode = append(j.Summary.PerNode, NodeSummary{Node: n, CPUEfficiency: 0.5, MemUsedPeak: 1 << 30})
	}
	j.Summary.Stragglers = []string{"cn00042"}
	if err := x.Upsert(j); err != nil {
		t.Fatal(err)
	}
	got, err := x.Get("9000")
	if err != nil || !reflect.DeepEqual(got, j) {
		t.Fatalf("10,000-node job did not come back whole: %v", err)
	}
	t.Logf("10,000-node job: %d bytes", x.Size())
	big := &Job{ID: "9001", Nodes: make([]string, MaxNodes+1)}
	if err := x.Upsert(big); err == nil {
		t.Fatal("a job of more than MaxNodes nodes was stored")
	}
}
