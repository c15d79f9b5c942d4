package nfsd_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/nfsd"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixtures: basic is an older kernel's file (ra line, float th values,
// proc2); new a recent one (no ra or proc2, 76 v4 operations,
// wdeleg_getattr). No NFS server on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "nfsd", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "nfsd", "testdata/basic", nil) }

func TestServerStartsLater(t *testing.T) {
	testutil.FileAppearsLater(t, "nfsd", map[string]string{"proc/net/rpc/nfsd": "rc 1 2 3\n"}, "node_nfsd_reply_cache_hits_total")
}

func TestParseErrors(t *testing.T) {
	var s nfsd.Stats
	for _, bad := range []string{
		"rc 1 2\n", "io 1 x\n", "th 8\n", "proc3 22 1 2 3\n", "proc2 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
		"proc4 3 1 2 3\n", "proc4ops 2 0 0\n", "net 1 2 3 4 5\n",
	} {
		if err := nfsd.Parse([]byte(bad), &s); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "nfsd", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
