package filefd_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/filefd"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "filefd", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "filefd", "testdata/basic", nil) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in         string
		alloc, max uint64
		bad        bool
	}{
		{in: "1304\t0\t2466170\n", alloc: 1304, max: 2466170},
		{in: "9223372036854775807 0 9223372036854775807", alloc: 1<<63 - 1, max: 1<<63 - 1},
		{in: "1 2\n", bad: true},
		{in: "x 0 1\n", bad: true},
		{in: "1 0 -1\n", bad: true},
		{in: "", bad: true},
	} {
		a, m, err := filefd.Parse([]byte(tc.in))
		if (err != nil) != tc.bad || !tc.bad && (a != tc.alloc || m != tc.max) {
			t.Errorf("Parse(%q) = %d, %d, %v", tc.in, a, m, err)
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "filefd", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("1304\t0\t2466170\n"))
	f.Fuzz(func(t *testing.T, data []byte) { _, _, _ = filefd.Parse(data) })
}
