package appio

import (
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/sampler"
)

// With an upstream (sampler.Env.IORecords), each record is shipped once,
// with its job, file system and counters, the last ones at Close; beyond
// 16,384 waiting they are counted, not kept.
func TestShip(t *testing.T) {
	root := fixture(t, map[int]string{os.Getpid(): "4242"})
	var mu sync.Mutex
	var got []FileRecord
	calls := 0
	p := New(DefaultConfig())
	env := sampler.Env{FS: kernfs.NewFS(root), Logger: slog.New(slog.DiscardHandler), IORecords: func(recs []appio.FileRecord) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		got = append(got, recs...) // copied: recs are ours only during the call
	}, IORecordsDropped: func() uint64 { return 7 }}
	if err := p.Init(env); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	shipped := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	c := dial(t, p)
	w := appio.Record{FileID: 1}
	w.C[appio.Writes], w.C[appio.BytesWritten] = 100000, 102_400_000
	r := appio.Record{FileID: 2}
	r.C[appio.Reads] = 3
	c.send(hello("999"), file(1, "/scratch/u/out.dat"), file(2, "/home/u/in"), interval(w, r), interval(w))
	waitFor(t, "3 records shipped", func() bool { return shipped() == 3 })
	mu.Lock()
	if calls != 1 {
		t.Errorf("%d calls for one interval's records, want 1 batch", calls)
	}
	f := got[0]
	mu.Unlock()
	if f.JobID != "4242" || f.Path != "/scratch/u/out.dat" || f.MountPoint != "/scratch" || f.FSType != "lustre" ||
		f.Counters[appio.BytesWritten] != 102_400_000 || f.PID != uint32(os.Getpid()) || f.Rank != 5 || f.Start != 1e9 || f.End != 2e9 {
		t.Errorf("first record %+v", f)
	}

	if m := sample(t, p, time.Now()); m["vigil_appio_upstream_dropped_records_total{}"] != 7 {
		t.Errorf("upstream drops not reported: %v", m)
	}

	// A flood beyond the bound: the rest counted. The shipper may take
	// some batches meanwhile, so count what arrived and what was not sent.
	for range 200 {
		recs := make([]appio.Record, 0, 200)
		for i := range 200 {
			x := appio.Record{FileID: uint32(i%2 + 1)}
			x.C[appio.Reads] = 1
			recs = append(recs, x)
		}
		c.send(interval(recs...))
	}
	waitRecords(t, p, 3+40_000)
	p.Close()
	if n := uint64(shipped()) + p.unshipped.Load(); n != 3+40_000 {
		t.Errorf("shipped %d + unshipped %d, want 40,003", shipped(), p.unshipped.Load())
	}
}
