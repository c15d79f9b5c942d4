package iorecords

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
)

// benchRecords is a cluster's records: 1,000 nodes, 100 jobs of 10 nodes,
// each node's process writing 10 files every second; batch i is one
// interval of one node (10 records), as one wire frame brings it.
func benchBatch(i int, dst []appio.FileRecord) []appio.FileRecord {
	node, sec := i%1000, i/1000
	job := strconv.Itoa(1000 + node/10)
	dst = dst[:0]
	for f := range 10 {
		r := appio.FileRecord{Start: t0.Add(time.Duration(sec) * time.Second).UnixNano(), Node: fmt.Sprintf("cn%04d", node),
			JobID: job, PID: uint32(10000 + node), UID: 1000 + uint32(node/10), Rank: int32(node % 10), Exe: "/apps/sim/bin/sim",
			Path: fmt.Sprintf("/scratch/u%d/run/out.%d.%d", node/10, node%10, f), MountPoint: "/scratch", FSType: "lustre"}
		r.End = r.Start + 1e9
		c := &r.Counters
		c[appio.Writes] = uint64(100 + f*sec%977)
		c[appio.BytesWritten] = c[appio.Writes] * 4096
		c[appio.WriteNS] = c[appio.Writes] * 2100
		c[appio.WriteHist+2] = c[appio.Writes]
		c[appio.SeqAccesses] = c[appio.Writes]
		dst = append(dst, r)
	}
	return dst
}

// BenchmarkAppend: records stored per second, 10 a batch (one node's
// interval); against the floor of writing the same bytes with WriteAt.
func BenchmarkAppend(b *testing.B) {
	b.Run("store", func(b *testing.B) {
		s, err := Open(Options{Dir: b.TempDir(), now: func() time.Time { return t0.Add(time.Hour) }})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		var batch []appio.FileRecord
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			batch = benchBatch(i, batch)
			if err := s.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(10*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("floor_writeat", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "x"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		var batch []appio.FileRecord
		var buf []byte
		var off int64
		b.ResetTimer()
		for i := range b.N {
			batch = benchBatch(i, batch)
			buf = buf[:0]
			for k := range batch {
				buf = appendStored(buf, &batch[k])
			}
			if _, err := f.WriteAt(buf, off); err != nil {
				b.Fatal(err)
			}
			off += int64(len(buf))
		}
		b.ReportMetric(float64(10*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

var (
	topOnce  sync.Once
	topStore *Store
	topDir   string
	topN     int
)

// BenchmarkTop: top-N queries over a store of VIGIL_IOREC_BENCH_N records
// (default 1,000,000; the figures in docs/benchmarks.md use 10,000,000),
// built once in a directory removed at the end: all files over the whole
// window (every record read), one job's files over it (1 % of the records,
// through the job index), one job over the last minute. The floor reads
// the segment files whole.
func BenchmarkTop(b *testing.B) {
	topOnce.Do(func() {
		topN = 1_000_000
		if v, err := strconv.Atoi(os.Getenv("VIGIL_IOREC_BENCH_N")); err == nil && v > 0 {
			topN = v
		}
		dir, err := os.MkdirTemp("", "iorec-bench")
		if err != nil {
			b.Fatal(err)
		}
		topDir = dir
		last := t0.Add(time.Duration(topN/10000) * time.Second)
		s, err := Open(Options{Dir: dir, now: func() time.Time { return last }})
		if err != nil {
			b.Fatal(err)
		}
		var batch []appio.FileRecord
		start := time.Now()
		for i := range topN / 10 {
			batch = benchBatch(i, batch)
			if err := s.Append(batch); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("stored %d records (%d MiB in %d segments) in %v", topN, s.bytes>>20, len(s.segs), time.Since(start))
		topStore = s
	})
	s := topStore
	end := t0.Add(time.Duration(topN/10000+1) * time.Second)
	run := func(name string, q Query) {
		b.Run(name, func(b *testing.B) {
			var res *Result
			for range b.N {
				var err error
				if res, err = s.Top(context.Background(), q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Records), "records")
			b.ReportMetric(float64(res.Records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
	run("all_files", Query{Start: t0, End: end, By: ByBytes, Limit: 20})
	run("one_job", Query{Start: t0, End: end, Job: "1042", HasJob: true, By: ByBytes, Limit: 20})
	run("one_job_last_minute", Query{Start: end.Add(-time.Minute), End: end, Job: "1042", HasJob: true, By: ByTime, Limit: 20})
	b.Run("reopen", func(b *testing.B) {
		// What a restart costs: reading every segment to rebuild the
		// index and the resend filter.
		for range b.N {
			s2, err := Open(Options{Dir: topDir, now: s.o.now})
			if err != nil {
				b.Fatal(err)
			}
			s2.Close()
		}
	})
	b.Run("floor_read", func(b *testing.B) {
		buf := make([]byte, 1<<20)
		for range b.N {
			for _, sg := range s.segs {
				if _, err := io.CopyBuffer(io.Discard, io.NewSectionReader(sg.f, 0, sg.size), buf); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	if topStore != nil {
		topStore.Close()
		os.RemoveAll(topDir)
	}
	os.Exit(code)
}
