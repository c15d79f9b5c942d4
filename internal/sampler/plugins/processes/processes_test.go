package processes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/processes"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "processes", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "processes", "testdata/basic", nil) }

func TestOffByDefaultEvery10s(t *testing.T) {
	reg, _ := sampler.Lookup("processes")
	if reg.Default {
		t.Error("processes is on by default")
	}
	if got := time.Duration(reg.NewConfig().CommonConfig().Interval); got != processes.DefaultInterval {
		t.Errorf("interval %v", got)
	}
}

// TestMaxThreads: past the bound thread states stop and the error says so.
func TestMaxThreads(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "processes", "testdata/basic", &processes.Config{MaxThreads: 2})
	var b metric.Batch
	err := p.Sample(context.Background(), time.Now(), &b)
	if err == nil || !strings.Contains(err.Error(), "max_threads") {
		t.Fatalf("err = %v, want the max_threads bound", err)
	}
	n := 0.0
	for _, s := range b.Samples() {
		if s.Desc.Name == "node_processes_threads_state" {
			n += s.Value
		}
	}
	if n != 2 {
		t.Fatalf("%v thread states counted, want 2", n)
	}
	b.Reset(time.Now())
	if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
		t.Fatalf("second tick: %v (the bound is reported once)", err)
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in      string
		state   byte
		threads int
		bad     bool
	}{
		{in: "4242 (a) b) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 7 0\n", state: 'R', threads: 7},
		{in: "1 (x) S 1 2", bad: true},
		{in: "no paren", bad: true},
		{in: "1 (x) SS 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 1", bad: true},
		{in: "1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 z", bad: true},
	} {
		st, n, err := processes.ParseStat([]byte(tc.in))
		if (err != nil) != tc.bad || !tc.bad && (st != tc.state || n != tc.threads) {
			t.Errorf("ParseStat(%q) = %c, %d, %v", tc.in, st, n, err)
		}
	}
}

func BenchmarkTickRealProc(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "processes", "/", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("4242 (lmp) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 7 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _, _ = processes.ParseStat(data) })
}
