package udpqueues_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/udpqueues"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixtures: sockets with queued bytes in both directions; a node without
// IPv6 (no udp6 file: no v6 series).
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "udp_queues", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "udp_queues", "testdata/basic", nil) }

func TestSumErrors(t *testing.T) {
	hdr := "sl local rem st q tr tm retr uid\n"
	for _, bad := range []string{
		"0: 0:0 0:0 07 00000000\n",
		"0: 0:0 0:0 07 0000000000000000 00:0 0 0 0\n",
		"0: 0:0 0:0 07 zz:00 00:0 0 0 0\n",
		"0 0:0 0:0 07 00:00 00:0 0 0 0\n",
		"0: 0:0 0:0 07 00:00 00:0 0 x 0\n",
	} {
		if _, _, err := udpqueues.Sum([]byte(hdr + bad)); err == nil {
			t.Errorf("Sum accepted %q", bad)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "udp_queues", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}
