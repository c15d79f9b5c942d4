package power_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/power"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "power", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "power", "testdata/server", nil) }

func TestNoPowercap(t *testing.T) { testutil.InitNotAvailable(t, "power") }

func BenchmarkTick(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "power", "testdata/server", nil)
	testutil.BenchTicks(b, p)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func get(b *metric.Batch, name string) (float64, bool) {
	for i, d := range b.Descs {
		if d.Name == name {
			return b.Values[i], true
		}
	}
	return 0, false
}

// The exported total never goes backwards: a wrap at max_energy_range_uj
// adds the energy across it, a reset (a step back that no wrap explains)
// adds nothing; both are counted, bad reads are left out and counted, and
// the ticks go on.
func TestWrapAndReset(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sys/class/powercap/intel-rapl:0")
	write(t, filepath.Join(dir, "name"), "package-0\n")
	write(t, filepath.Join(dir, "max_energy_range_uj"), "1000000000\n") // 1 kJ
	energy := filepath.Join(dir, "energy_uj")
	write(t, energy, "999000000\n")
	p, _ := testutil.NewPlugin(t, "power", root, nil)
	var b metric.Batch
	for i, s := range []struct {
		content            string
		joules             float64
		wraps, resets, bad float64
	}{
		{"999000000\n", 999, 0, 0, 0},
		{"999500000\n", 999.5, 0, 0, 0},
		{"1500000\n", 1001.5, 1, 0, 0}, // wrapped: 0.5 J to the top, 1.5 J after
		{"2500000\n", 1002.5, 1, 0, 0},
		{"garbage\n", 1002.5, 1, 0, 1},    // left out: the last total stays
		{"1000000001\n", 1002.5, 1, 0, 2}, // beyond the range
		{"700000000\n", 1700, 1, 0, 2},    // 697.5 J since the last good read
		{"500000000\n", 1700, 1, 1, 2},    // a wrap would mean 800 J, more than half the range: a reset
		{"500000010\n", 1700.00001, 1, 1, 2},
	} {
		write(t, energy, s.content)
		b.Reset(time.Now())
		if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatal(err)
		}
		j, ok := get(&b, "node_rapl_package_joules_total")
		if s.content == "garbage\n" || s.content == "1000000001\n" {
			if ok {
				t.Errorf("step %d: a bad read was exported as %v", i, j)
			}
			j = s.joules
		}
		wraps, _ := get(&b, "vigil_power_rapl_wraps_total")
		resets, _ := get(&b, "vigil_power_rapl_resets_total")
		bad, _ := get(&b, "vigil_power_bad_reads_total")
		if math.Abs(j-s.joules) > 1e-6 || wraps != s.wraps || resets != s.resets || bad != s.bad {
			t.Errorf("step %d (%q): %v J, wraps %v, resets %v, bad %v; want %v, %v, %v, %v",
				i, s.content, j, wraps, resets, bad, s.joules, s.wraps, s.resets, s.bad)
		}
	}
}

func TestIndexAndName(t *testing.T) {
	uses := map[string]int{}
	var got []string
	for _, n := range []string{"package-0", "dram", "package-1", "dram", "psys", "core", "core", "a-b-c", "package-x"} {
		i, name := power.IndexAndName(uses, n)
		uses[name] = i + 1
		got = append(got, name+"/"+strconv.Itoa(i))
	}
	want := []string{"package/0", "dram/0", "package/1", "dram/1", "psys/0", "core/0", "core/1", "a-b-c/0", "package-x/0"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("zone %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// Advance never returns more than the range, and a forward step is exact.
func FuzzAdvance(f *testing.F) {
	f.Add(uint64(10), uint64(5), uint64(100))
	f.Add(uint64(99), uint64(1), uint64(100))
	f.Add(uint64(0), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, prev, cur, max uint64) {
		s := power.Advance(prev, cur, max)
		switch {
		case cur >= prev && (s.Delta != cur-prev || s.Reset || s.Wrapped):
			t.Errorf("Advance(%d, %d, %d) = %+v", prev, cur, max, s)
		case cur < prev && !s.Reset && (s.Delta > max/2 || !s.Wrapped):
			t.Errorf("Advance(%d, %d, %d) = %+v", prev, cur, max, s)
		}
	})
}

// Whatever energy_uj holds from tick to tick, the exported total never
// goes backwards and the tick goes on.
func FuzzSample(f *testing.F) {
	f.Add([]byte("999000000\n"), []byte("1500000\n"), []byte("x"))
	f.Add([]byte(""), []byte("18446744073709551615"), []byte("-1"))
	f.Fuzz(func(t *testing.T, a, b, c []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "sys/class/powercap/intel-rapl:0")
		write(t, filepath.Join(dir, "name"), "package-0\n")
		write(t, filepath.Join(dir, "max_energy_range_uj"), "1000000000\n")
		energy := filepath.Join(dir, "energy_uj")
		write(t, energy, "0\n")
		p, _ := testutil.NewPlugin(t, "power", root, nil)
		var batch metric.Batch
		last := -1.0
		for _, content := range [][]byte{a, b, c, a} {
			write(t, energy, string(content))
			batch.Reset(time.Now())
			if err := p.Sample(context.Background(), time.Now(), &batch); err != nil {
				t.Fatal(err)
			}
			if j, ok := get(&batch, "node_rapl_package_joules_total"); ok {
				if math.IsNaN(j) || j < last {
					t.Fatalf("total %v after %v", j, last)
				}
				last = j
			}
		}
	})
}
