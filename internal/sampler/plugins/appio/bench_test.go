//go:build linux

package appio

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// BenchmarkSample is one tick of one job on three file systems and
// "other": 155 series.
func BenchmarkSample(b *testing.B) {
	p := newPlugin(b, fixture(b, map[int]string{os.Getpid(): "1"}), nil)
	c := dial(b, p)
	c.send(hello(""), file(1, "/scratch/a"), file(2, "/home/b"), file(3, "/tmp/c"))
	rec := func(id uint32) appio.Record {
		r := appio.Record{FileID: id}
		r.C[appio.Writes] = 1
		return r
	}
	c.send(interval(rec(1), rec(2), rec(3), rec(0)))
	waitRecords(b, p, 4)
	testutil.BenchTicks(b, p)
}

// BenchmarkIngest is the listener's throughput: full INTERVAL messages
// (appio.MaxRecords records over 64 files) from one client, through
// the socket, decoded and accumulated.
func BenchmarkIngest(b *testing.B) {
	p := newPlugin(b, fixture(b, map[int]string{os.Getpid(): "1"}), nil)
	c := dial(b, p)
	c.send(hello(""))
	for i := 1; i <= 64; i++ {
		c.send(file(uint32(i), fmt.Sprintf("/scratch/f%d", i)))
	}
	recs := make([]appio.Record, appio.MaxRecords)
	for i := range recs {
		recs[i].FileID = uint32(i%64 + 1)
		recs[i].C[appio.Writes], recs[i].C[appio.BytesWritten] = 10, 10240
	}
	msg := interval(recs...)
	start := time.Now()
	b.ResetTimer()
	for b.Loop() {
		c.send(msg)
	}
	waitRecords(b, p, uint64(b.N)*appio.MaxRecords)
	b.StopTimer()
	b.ReportMetric(float64(b.N*appio.MaxRecords)/time.Since(start).Seconds(), "records/s")
}
