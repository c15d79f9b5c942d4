package jobs

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// endedJob is a typical ended job with its summary: 1-4 nodes.
func endedJob(i int) *Job {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7 * time.Second)
	n := 1 + i%4
	j := &Job{
		ID: strconv.Itoa(1000000 + i), User: fmt.Sprintf("user%03d", i%300), Account: fmt.Sprintf("proj%02d", i%40),
		Partition: []string{"batch", "gpu", "long", "debug"}[i%4], Name: fmt.Sprintf("run_%d.sh", i%1000),
		CPUs: 32 * n, MemBytes: int64(n) * 64 << 30, TimeLimit: Duration(24 * time.Hour),
		Submit: start.Add(-time.Duration(i%600) * time.Second), Start: start, End: start.Add(time.Duration(600+i%86400) * time.Second),
		State: []State{StateCompleted, StateFailed, StateTimeout, StateCancelled}[i%4],
		Summary: &Summary{CPUEfficiency: float64(i%1000) / 1000, MemUsedPeak: int64(i) << 20, MemEfficiency: 0.42,
			ReadBytes: int64(i) << 24, WriteBytes: int64(i) << 22},
	}
	for k := range n {
		node := fmt.Sprintf("cn%04d", (i*7+k)%2000)
		j.Nodes = append(j.Nodes, node)
		j.Summary.PerNode = append(j.Summary.PerNode, NodeSummary{Node: node, CPUEfficiency: 0.5, MemUsedPeak: int64(i) << 18, ReadBytes: int64(i) << 22, WriteBytes: int64(i) << 20})
	}
	if i%10 == 0 {
		j.Summary.Notes = []string{"used 6 % of the 64 GiB asked: ask for 8 GiB next time"}
	}
	return j
}

// build indexes n ended jobs in dir, as the nodes and Slurm would: a
// running record, then the ended one.
func build(tb testing.TB, dir string, n int) *Index {
	x, err := Open(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	x.noSync = true
	for i := range n {
		j := endedJob(i)
		r := *j
		r.State, r.End, r.Summary = StateRunning, time.Time{}, nil
		if err := x.Upsert(&r); err != nil {
			tb.Fatal(err)
		}
		if err := x.Upsert(j); err != nil {
			tb.Fatal(err)
		}
	}
	return x
}

// BenchmarkIndexBytesPerJob reports the log's size per ended job after
// 100,000 (each written running, then ended with a summary), compacted
// as an Open does.
func BenchmarkIndexBytesPerJob(b *testing.B) {
	for range b.N {
		dir := b.TempDir()
		x := build(b, dir, 100000)
		raw := x.Size()
		x.Close()
		y, err := Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(raw)/100000, "log-bytes/job")
		b.ReportMetric(float64(y.Size())/100000, "bytes/job")
		y.Close()
	}
}

var (
	millionOnce sync.Once
	million     *Index
	millionDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if million != nil {
		million.Close()
		os.RemoveAll(millionDir)
	}
	os.Exit(code)
}

func millionJobs(b *testing.B) *Index {
	millionOnce.Do(func() {
		var err error
		if millionDir, err = os.MkdirTemp("", "vigil-jobs-bench"); err != nil {
			b.Fatal(err)
		}
		x := build(b, millionDir, 1000000)
		x.Close()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		t0 := time.Now()
		if million, err = Open(millionDir, nil); err != nil {
			b.Fatal(err)
		}
		took := time.Since(t0)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.Logf("1,000,000 jobs: %d bytes on disk, opened in %v, %d bytes of heap (%d a job)",
			million.Size(), took, m1.HeapAlloc-m0.HeapAlloc, (m1.HeapAlloc-m0.HeapAlloc)/1000000)
	})
	return million
}

// BenchmarkList1M lists over 1,000,000 ended jobs with the filters a user
// would give.
func BenchmarkList1M(b *testing.B) {
	x := millionJobs(b)
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(999000 * 7 * time.Second)
	for _, c := range []struct {
		name string
		f    Filter
	}{
		{"all-limit1000", Filter{}},
		{"user", Filter{User: "user042"}},
		{"user-state-partition", Filter{User: "user042", State: StateFailed, Partition: "gpu"}}, // matches nothing: scans all
		{"since-1000", Filter{Since: since}},
		{"all-limit100000", Filter{Limit: MaxLimit}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for range b.N {
				l, err := x.List(c.f)
				if err != nil {
					b.Fatal(err)
				}
				n = len(l)
			}
			b.ReportMetric(float64(n), "jobs")
		})
	}
}

// BenchmarkTap is ingest's cost of the tap per tick of a node with 300
// series: without jobs, and with 4 jobs running.
func BenchmarkTap(b *testing.B) {
	for _, jobs := range []int{0, 4} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			m, err := New(Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			var ids []string
			for i := range jobs {
				ids = append(ids, strconv.Itoa(100+i))
			}
			descs := schema(ids...)
			for len(descs) < 300 {
				descs = append(descs, metric.NewDesc(fmt.Sprintf("node_x%d", len(descs)), "", metric.Gauge))
			}
			vals := values(descs, 1)
			nodes := make([]string, 1000)
			for i := range nodes {
				nodes[i] = fmt.Sprintf("cn%04d", i)
			}
			t0 := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				m.Tick(nodes[i%len(nodes)], t0, descs, vals)
			}
		})
	}
}
