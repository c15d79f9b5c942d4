package infiniband_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/infiniband"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// Fixtures (testdata/README.md): mlx4 with 32-bit counters, a saturated
// one and counters_ext; mlx5 with hw_counters and a down device;
// malformed files. No HCA on the development VM.
func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "infiniband", nil) }

func TestZeroAllocs(t *testing.T) { testutil.ZeroAllocs(t, "infiniband", "testdata/mlx5", nil) }

// Without an adapter (a VM) the plugin emits nothing and a tick costs
// nothing; one that appears later is read.
func TestNoAdapter(t *testing.T) {
	testutil.FileAppearsLater(t, "infiniband", map[string]string{"sys/class/infiniband/mlx4_0/ports/1/state": "4: ACTIVE\n"},
		"node_infiniband_state_id")
}

func TestInterval(t *testing.T) {
	testutil.DefaultInterval(t, "infiniband", infiniband.DefaultInterval)
}

func BenchmarkTick(b *testing.B) {
	for _, fx := range []string{"mlx4", "mlx5"} {
		b.Run(fx, func(b *testing.B) {
			p, _ := testutil.NewPlugin(b, "infiniband", "testdata/"+fx, nil)
			testutil.BenchTicks(b, p)
		})
	}
}

// value returns the value of the series named name in b (with the labels
// given as name=value pairs), and whether there is one.
func value(b *metric.Batch, name string, labels ...string) (float64, bool) {
	for i, d := range b.Descs {
		if d.Name != name {
			continue
		}
		ok := true
		for k := 0; k+1 < len(labels); k += 2 {
			found := false
			for _, l := range d.Labels {
				if l.Name == labels[k] && l.Value == labels[k+1] {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			return b.Values[i], true
		}
	}
	return 0, false
}

// A counter that goes backwards (perfquery -R, a driver reload) is
// exported as read and counted as a reset; a malformed read is left out
// and counted; the ticks go on. A 32-bit counter at 2^32-1 is saturated:
// left out, not exported as a rate of zero.
func TestBadInputAcrossTicks(t *testing.T) {
	f := testutil.NewFileFixture(t, "infiniband", "sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data", "1000\n", nil)
	var b metric.Batch
	tick := func(content string) (got float64, ok bool, bad, resets, sat float64) {
		t.Helper()
		f.Write(content)
		b.Reset(time.Now())
		if err := f.P.Sample(context.Background(), time.Now(), &b); err != nil {
			t.Fatalf("sample: %v", err)
		}
		got, ok = value(&b, "node_infiniband_port_data_received_bytes_total", "device", "mlx5_0", "port", "1")
		bad, _ = value(&b, "vigil_infiniband_bad_reads_total")
		resets, _ = value(&b, "vigil_infiniband_counter_resets_total")
		sat, _ = value(&b, "vigil_infiniband_saturated_reads_total")
		return
	}
	steps := []struct {
		content                string
		want                   float64
		ok                     bool
		bad, resets, saturated float64
	}{
		{"1000\n", 4000, true, 0, 0, 0},
		{"2000\n", 8000, true, 0, 0, 0},
		{"20", 80, true, 0, 1, 0},                // reset, no newline
		{"3x0\n", 0, false, 1, 1, 0},             // malformed
		{"", 0, false, 2, 1, 0},                  // truncated to nothing
		{"4294967295\n", 0, false, 2, 1, 1},      // saturated 32-bit counter
		{"4294967296\n", 4 << 32, true, 2, 1, 1}, // a 64-bit counter passes it
		{"N/A (no PMA)\n", 0, false, 2, 1, 1},    // no performance agent: absent
	}
	for i, s := range steps {
		got, ok, bad, resets, sat := tick(s.content)
		if ok != s.ok || got != s.want || bad != s.bad || resets != s.resets || sat != s.saturated {
			t.Errorf("step %d (%q): value %v (present %v), bad %v, resets %v, saturated %v; want %v (%v), %v, %v, %v",
				i, s.content, got, ok, bad, resets, sat, s.want, s.ok, s.bad, s.resets, s.saturated)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"100 Gb/sec (4X EDR)\n", 12.5e9, true},
		{"2.5 Gb/sec (1X SDR)", 312500000, true},
		{"56 Gb/sec (4X FDR)", 7e9, true},
		{"53.125 Gb/sec (1X HDR)", 6640625000, true},
		{"", 0, false},
		{"100", 0, false},
		{"fast Gb/sec", 0, false},
		{"-1 Gb/sec", 0, false},
	} {
		got, ok := infiniband.ParseRate([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRate(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseState(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"4: ACTIVE\n", 4, true}, {"5: LinkUp", 5, true}, {"1: DOWN", 1, true},
		{"ACTIVE", 0, false}, {"4:", 0, false}, {": ACTIVE", 0, false}, {"999: X", 0, false}, {"", 0, false},
	} {
		got, ok := infiniband.ParseState([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseState(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// The parsers never panic, and what they accept round-trips.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"4: ACTIVE\n", "100 Gb/sec (4X EDR)\n", "12345\n", "N/A (no PMA)\n", "18446744073709551615", "1e9 Gb/sec x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, st := infiniband.ParseCounter(b); st == infiniband.OK {
			line, _, _ := strings.Cut(string(b), "\n")
			if strconv.FormatUint(v, 10) != strings.TrimLeft(strings.TrimSpace(line), "0") && v != 0 {
				t.Errorf("ParseCounter(%q) = %d", b, v)
			}
		}
		if v, ok := infiniband.ParseState(b); ok && v > 255 {
			t.Errorf("ParseState(%q) = %d", b, v)
		}
		if v, ok := infiniband.ParseRate(b); ok && (v < 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Errorf("ParseRate(%q) = %v", b, v)
		}
	})
}

// BenchmarkFloor is the least a tick can cost: one raw pread per file the
// plugin reads on the fixture, descriptors open, nothing parsed.
func BenchmarkFloor(b *testing.B) {
	for _, fx := range []string{"mlx4", "mlx5"} {
		b.Run(fx, func(b *testing.B) {
			var fds []int
			filepath.WalkDir("testdata/"+fx, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, "want.txt") && !strings.HasSuffix(p, "_id") &&
					!strings.HasSuffix(p, "fw_ver") && !strings.HasSuffix(p, "hca_type") && !strings.HasSuffix(p, "board_id") && !strings.Contains(p, "rx_xrc_not_known") {
					if fd, err := syscall.Open(p, syscall.O_RDONLY, 0); err == nil {
						fds = append(fds, fd)
					}
				}
				return nil
			})
			defer func() {
				for _, fd := range fds {
					syscall.Close(fd)
				}
			}()
			buf := make([]byte, 64)
			for b.Loop() {
				for _, fd := range fds {
					syscall.Pread(fd, buf, 0)
				}
			}
			b.ReportMetric(float64(len(fds)), "files")
		})
	}
}

// Whatever the state, rate and counter files hold from tick to tick, the
// tick goes on, never fails, and the bad-read count only grows.
func FuzzSample(f *testing.F) {
	f.Add([]byte("4: ACTIVE\n"), []byte("100 Gb/sec (4X EDR)\n"), []byte("12\n"), []byte("11\n"))
	f.Add([]byte(":"), []byte(" Gb/sec"), []byte("N/A"), []byte("4294967295"))
	f.Fuzz(func(t *testing.T, state, rate, c1, c2 []byte) {
		root := t.TempDir()
		port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
		files := map[string][]byte{"state": state, "rate": rate, "counters/port_rcv_data": c1, "hw_counters/out_of_buffer": c1}
		for rel := range files {
			os.MkdirAll(filepath.Dir(filepath.Join(port, rel)), 0o755)
			os.WriteFile(filepath.Join(port, rel), []byte("0\n"), 0o644)
		}
		p, _ := testutil.NewPlugin(t, "infiniband", root, nil)
		var b metric.Batch
		last := 0.0
		for _, c := range [][]byte{c1, c2, c1} {
			files["counters/port_rcv_data"], files["hw_counters/out_of_buffer"] = c, c
			for rel, content := range files {
				os.WriteFile(filepath.Join(port, rel), content, 0o644)
			}
			b.Reset(time.Now())
			if err := p.Sample(context.Background(), time.Now(), &b); err != nil {
				t.Fatal(err)
			}
			bad, ok := value(&b, "vigil_infiniband_bad_reads_total")
			if !ok || bad < last {
				t.Fatalf("bad reads %v after %v", bad, last)
			}
			last = bad
		}
	})
}

// An adapter whose driver loads after the sampler (openibd after vigil)
// is found within 64 ticks; until then a tick costs nothing.
func TestAdapterAppearsLater(t *testing.T) {
	root := t.TempDir()
	p, _ := testutil.NewPlugin(t, "infiniband", root, nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, sampler.ErrNotAvailable) {
		t.Fatalf("err = %v, want ErrNotAvailable", err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = p.Sample(context.Background(), time.Now(), &b) }); n != 0 {
		t.Errorf("no device: %v allocations a tick, want 0", n)
	}
	port := filepath.Join(root, "sys/class/infiniband/mlx5_0/ports/1")
	os.MkdirAll(filepath.Join(port, "counters"), 0o755)
	os.WriteFile(filepath.Join(port, "state"), []byte("4: ACTIVE\n"), 0o644)
	os.WriteFile(filepath.Join(port, "counters/port_xmit_data"), []byte("10\n"), 0o644)
	for i := 0; i < 64; i++ {
		b.Reset(time.Now())
		if err := p.Sample(context.Background(), time.Now(), &b); err == nil {
			if v, ok := value(&b, "node_infiniband_port_data_transmitted_bytes_total", "device", "mlx5_0", "port", "1"); ok && v == 40 {
				return
			}
		}
	}
	t.Fatal("the adapter that appeared was not read within 64 ticks")
}
