package softnet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"

	"github.com/vigil-hpc/vigil/internal/sampler/plugins/softnet"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixtures: basic is a 6.x kernel with CPU 2 offline (the CPU column
// says 3 on the third line); old is a 4.x kernel without that column.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "softnet", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "softnet", "testdata/basic", nil) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		cpus []int
		bad  bool
	}{
		{in: "1 0 0 0 0 0 0 0 0\n2 0 0 0 0 0 0 0 0\n", cpus: []int{0, 1}},
		{in: "1 0 0 0 0 0 0 0 0 0 0 0 7 0\n", cpus: []int{7}},
		{in: "1 0 0\n", bad: true},
		{in: "zz 0 0 0 0 0 0 0 0\n", bad: true},
		{in: "1 0 0 0 0 0 0 0 0 0 0 0 fffffff\n", bad: true},
	} {
		var cpus []int
		err := softnet.Parse([]byte(tc.in), func(cpu int, _ [softnet.NumStats]uint64) { cpus = append(cpus, cpu) })
		if (err != nil) != tc.bad || !tc.bad && len(cpus) != len(tc.cpus) {
			t.Errorf("Parse(%q) = %v, %v", tc.in, cpus, err)
			continue
		}
		for i := range tc.cpus {
			if !tc.bad && cpus[i] != tc.cpus[i] {
				t.Errorf("Parse(%q) cpus %v, want %v", tc.in, cpus, tc.cpus)
			}
		}
	}
}

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "softnet", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("0006fe54 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = softnet.Parse(data, func(cpu int, _ [softnet.NumStats]uint64) {
			if cpu < 0 || cpu >= softnet.MaxCPU {
				t.Fatalf("cpu %d", cpu)
			}
		})
	})
}

// TestDuplicateCPU: a CPU index listed twice is exported once and reported.
func TestDuplicateCPU(t *testing.T) {
	line := "00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n"
	f := testutil.NewFileFixture(t, "softnet", "proc/net/softnet_stat", line+line, nil)
	var b metric.Batch
	if err := f.P.Sample(context.Background(), time.Now(), &b); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("err = %v", err)
	}
	if len(b.Samples()) != softnet.NumStats {
		t.Fatalf("%d samples, want %d", len(b.Samples()), softnet.NumStats)
	}
}
