package nfs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/nfs"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixture: a 6.x client without NFSv2 (no proc2 line: its series read 0).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "nfs", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "nfs", "testdata/basic", nil) }

func TestNoClient(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "nfs", t.TempDir(), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
}

func TestParse(t *testing.T) {
	var s nfs.Stats
	if err := nfs.Parse([]byte("net 1 2 3 4\nrpc 5 6 7\nproc4 3 10 11 12\nproc9 1 1\n"), &s); err != nil {
		t.Fatal(err)
	}
	if s.UDP != 2 || s.TCP != 3 || s.TCPConnect != 4 || s.RPCs != 5 || s.V4[0] != 10 || s.V4[2] != 12 || s.V4[3] != 0 {
		t.Fatalf("stats %+v", s)
	}
	for _, bad := range []string{"net 1 2\n", "rpc 1 2 3 4\n", "proc3 5 1 2\n", "proc3 x\n", "rpc 1 2 -3\n"} {
		if err := nfs.Parse([]byte(bad), &s); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "nfs", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("net 0 0 0 0\nrpc 1 0 0\nproc3 22 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s nfs.Stats
		_ = nfs.Parse(data, &s)
	})
}

// TestModuleLoadsLater: a missing file is looked for again every 64 ticks
// (not every tick), so a module loaded after start-up is picked up.
func TestModuleLoadsLater(t *testing.T) {
	testutil.FileAppearsLater(t, "nfs", map[string]string{"proc/net/rpc/nfs": "net 0 1 2 3\nrpc 4 0 0\n"}, "node_nfs_rpcs_total")
}
