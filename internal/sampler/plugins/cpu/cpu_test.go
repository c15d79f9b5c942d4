package cpu_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/cpu"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "cpu", nil) }

const tail = "intr 10 1 2\nctxt 20\nbtime 30\nprocesses 40\nprocs_running 5\nprocs_blocked 6\n"

func TestParse(t *testing.T) {
	full := cpu.Stat{BootTime: 30, ContextSwitches: 20, Forks: 40, Interrupts: 10, ProcsRunning: 5, ProcsBlocked: 6, Found: 63}
	withCPUs := func(s cpu.Stat, cs ...cpu.CPUTimes) cpu.Stat { s.CPUs = cs; return s }
	for _, tc := range []struct {
		name    string
		in      string
		want    cpu.Stat
		wantErr string // substring; "" means no error
	}{
		{
			name: "modern",
			in:   "cpu  3 3 3 3 3 3 3 3 3 3\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 11 12 13 14 15 16 17 18 19 20\n" + tail,
			want: withCPUs(full,
				cpu.CPUTimes{ID: 0, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
				cpu.CPUTimes{ID: 1, Jiffies: [cpu.NumTimes]uint64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}}),
		},
		{
			name: "old kernel without guest columns, tabs, no final newline",
			in:   "cpu0\t1 2 3 4 5 6 7 8\n" + strings.TrimSuffix(tail, "\n"),
			want: withCPUs(full, cpu.CPUTimes{ID: 0, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8}}),
		},
		{
			name: "future columns ignored, unknown lines skipped",
			in:   "page 1 2\ncpu7 1 2 3 4 5 6 7 8 9 10 11 12\nnew_thing x y\n\n" + tail + "softirq 1 2 3\n",
			want: withCPUs(full, cpu.CPUTimes{ID: 7, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}),
		},
		{
			name:    "short line still lets the rest parse",
			in:      "cpu0 1 2 3\ncpu1 1 2 3 4 5 6 7 8 9 10\n" + tail,
			want:    withCPUs(full, cpu.CPUTimes{ID: 1, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}),
			wantErr: `line 1 "cpu0 1 2 3": short line: 3 time values`,
		},
		{
			name:    "bad number",
			in:      "cpu0 1 2 3 4 x 6 7 8 9 10\ncpu1 1 2 3 4 5 6 7 8 9 10\n" + tail,
			want:    withCPUs(full, cpu.CPUTimes{ID: 1, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}),
			wantErr: `line 1 "cpu0 1 2 3 4 x 6 7 8 9 10": column 6 "x"`,
		},
		{
			name:    "bad CPU number",
			in:      "cpuX 1 2 3 4 5 6 7 8 9 10\ncpu99999999 1 2 3 4 5 6 7 8\ncpu1 1 2 3 4 5 6 7 8 9 10\n" + tail,
			want:    withCPUs(full, cpu.CPUTimes{ID: 1, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}),
			wantErr: `line 1 "cpuX 1 2 3 4 5 6 7 8 9 10": bad CPU number "X": unexpected format (and 1 more problems)`,
		},
		{
			name:    "missing value of a counter",
			in:      "cpu0 1 2 3 4 5 6 7 8 9 10\nctxt\n",
			want:    cpu.Stat{CPUs: []cpu.CPUTimes{{ID: 0, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}}},
			wantErr: `line 2 "ctxt": invalid number`,
		},
		{
			name:    "truncated file",
			in:      "cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 10 1 2\nctxt 20\n",
			want:    cpu.Stat{CPUs: []cpu.CPUTimes{{ID: 0, Jiffies: [cpu.NumTimes]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}}, Interrupts: 10, ContextSwitches: 20, Found: cpu.FoundContextSwitches | cpu.FoundInterrupts},
			wantErr: `no "btime" line`,
		},
		{
			name:    "empty",
			in:      "",
			wantErr: "no per-CPU lines",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got cpu.Stat
			err := cpu.Parse([]byte(tc.in), &got)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			}
			if len(got.CPUs) == 0 {
				got.CPUs = nil
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrorsWrap(t *testing.T) {
	var s cpu.Stat
	if err := cpu.Parse([]byte("cpu0 1 2 3\n"+tail), &s); !errors.Is(err, cpu.ErrFormat) {
		t.Errorf("short line: %v does not wrap ErrFormat", err)
	}
	if err := cpu.Parse([]byte("cpu0 1 2 3 4 5 6 7 -8\n"+tail), &s); !errors.Is(err, kernfs.ErrSyntax) {
		t.Errorf("bad number: %v does not wrap kernfs.ErrSyntax", err)
	}
}

// fixture is the plugin on a writable temporary root.
type fixture struct{ *testutil.FileFixture }

func newFixture(t *testing.T, content string) *fixture {
	return &fixture{testutil.NewFileFixture(t, "cpu", "proc/stat", content, nil)}
}

// sample returns the values by "name{labels}" and the error of one tick.
func (f *fixture) sample() (map[string]float64, error) {
	var b metric.Batch
	b.Reset(time.Unix(1700000000, 0))
	err := f.P.Sample(context.Background(), b.Time, &b)
	got := map[string]float64{}
	for _, s := range b.Samples() {
		key := string(metric.AppendSeries(nil, s.Desc, nil))
		if _, dup := got[key]; dup {
			f.T.Errorf("series %s emitted twice", key)
		}
		got[key] = s.Value
	}
	return got, err
}

func seconds(cpu int, mode string) string {
	return fmt.Sprintf(`node_cpu_seconds_total{cpu="%d",mode="%s"}`, cpu, mode)
}

func TestHotplug(t *testing.T) {
	f := newFixture(t, "cpu0 100 0 0 1000 0 0 0 0 0 0\ncpu1 200 0 0 2000 0 0 0 0 0 0\ncpu2 300 0 0 3000 0 0 0 0 0 0\n"+tail)
	got, err := f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if got[seconds(2, "user")] != 3 {
		t.Fatalf("cpu2 user = %v, want 3", got[seconds(2, "user")])
	}

	f.Write("cpu0 110 0 0 1100 0 0 0 0 0 0\ncpu2 310 0 0 3100 0 0 0 0 0 0\n" + tail)
	got, err = f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[seconds(1, "idle")]; ok {
		t.Errorf("offline cpu1 still exported")
	}
	if len(got) != 2*cpu.NumTimes+6 {
		t.Errorf("%d series, want %d", len(got), 2*cpu.NumTimes+6)
	}
	if got[seconds(2, "idle")] != 31 {
		t.Errorf("cpu2 idle = %v, want 31", got[seconds(2, "idle")])
	}

	// cpu1 comes back with counters restarted from zero: they must be
	// exported as they are, not held at the values from before it went away.
	f.Write("cpu0 120 0 0 1200 0 0 0 0 0 0\ncpu1 5 0 0 50 0 0 0 0 0 0\ncpu2 320 0 0 3200 0 0 0 0 0 0\n" + tail)
	got, err = f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if got[seconds(1, "user")] != 0.05 || got[seconds(1, "idle")] != 0.5 {
		t.Errorf("returning cpu1 user, idle = %v, %v; want 0.05, 0.5", got[seconds(1, "user")], got[seconds(1, "idle")])
	}
}

func TestCountersNeverGoBack(t *testing.T) {
	f := newFixture(t, "cpu0 100 0 0 10000 500 0 0 0 0 0\n"+tail)
	if _, err := f.sample(); err != nil {
		t.Fatal(err)
	}
	// iowait dips (a known kernel quirk) and idle dips by less than 3 s:
	// both keep their previous values; user moves on.
	f.Write("cpu0 150 0 0 9900 490 0 0 0 0 0\n" + tail)
	got, err := f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if got[seconds(0, "iowait")] != 5 || got[seconds(0, "idle")] != 100 || got[seconds(0, "user")] != 1.5 {
		t.Errorf("iowait, idle, user = %v, %v, %v; want 5, 100, 1.5",
			got[seconds(0, "iowait")], got[seconds(0, "idle")], got[seconds(0, "user")])
	}
	// idle back by 3 s or more: the CPU was replugged, counters restart.
	f.Write("cpu0 20 0 0 9600 10 0 0 0 0 0\n" + tail)
	got, err = f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if got[seconds(0, "iowait")] != 0.1 || got[seconds(0, "idle")] != 96 || got[seconds(0, "user")] != 0.2 {
		t.Errorf("after replug iowait, idle, user = %v, %v, %v; want 0.1, 96, 0.2",
			got[seconds(0, "iowait")], got[seconds(0, "idle")], got[seconds(0, "user")])
	}
}

func TestSampleErrors(t *testing.T) {
	f := newFixture(t, "cpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 1 2\n"+tail)
	got, err := f.sample()
	if err == nil || !strings.Contains(err.Error(), f.Path+": line 2") {
		t.Errorf("error = %v, want it to name %s and line 2", err, f.Path)
	}
	if got[seconds(0, "steal")] != 0.08 || got["node_context_switches_total"] != 20 {
		t.Errorf("good lines not exported: %v", got)
	}
	if _, ok := got[seconds(1, "user")]; ok {
		t.Errorf("short cpu1 line exported")
	}

	f.Write("cpu0 1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n" + tail)
	if _, err := f.sample(); err == nil || !strings.Contains(err.Error(), "cpu0 listed twice") {
		t.Errorf("duplicate line: error = %v", err)
	}

	if err := os.Remove(f.Path); err != nil {
		t.Fatal(err)
	}
	p, _ := testutil.NewPlugin(t, "cpu", filepath.Dir(filepath.Dir(f.Path)), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), f.Path) {
		t.Errorf("missing file: error = %v", err)
	}
}

// genStat returns a /proc/stat of n CPUs with varied values.
func genStat(n int) string {
	var sb strings.Builder
	x := uint64(88172645463325252)
	next := func() uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x % 100000000 }
	fmt.Fprintf(&sb, "cpu  %d %d %d %d %d %d %d %d %d %d\n", next(), next(), next(), next(), next(), next(), next(), next(), next(), next())
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "cpu%d %d %d %d %d %d %d %d %d %d %d\n", i, next(), next(), next(), next(), next(), next(), next(), next(), next(), next())
	}
	sb.WriteString("intr 1234567890")
	for i := 0; i < 40*n; i++ {
		fmt.Fprintf(&sb, " %d", next()%1000)
	}
	sb.WriteString("\nctxt 987654321\nbtime 1699990000\nprocesses 4242424\nprocs_running 17\nprocs_blocked 2\n")
	sb.WriteString("softirq 1 2 3 4 5 6 7 8 9 10 11\n")
	return sb.String()
}

func TestManyCPUs(t *testing.T) {
	content := genStat(256)
	f := newFixture(t, content)
	got, err := f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 256*cpu.NumTimes+6 {
		t.Errorf("%d series, want %d", len(got), 256*cpu.NumTimes+6)
	}
	// Cross-check one CPU against an independent parse of its line.
	for _, line := range strings.Split(content, "\n") {
		if !strings.HasPrefix(line, "cpu255 ") {
			continue
		}
		var user, nice, system, idle, iowait, irq, softirq, steal, guest, guestNice uint64
		if _, err := fmt.Sscanf(line, "cpu255 %d %d %d %d %d %d %d %d %d %d", &user, &nice, &system, &idle, &iowait, &irq, &softirq, &steal, &guest, &guestNice); err != nil {
			t.Fatal(err)
		}
		if want := float64(softirq) / 100; got[seconds(255, "softirq")] != want {
			t.Errorf("cpu255 softirq = %v, want %v", got[seconds(255, "softirq")], want)
		}
		if want := float64(guestNice) / 100; got[`node_cpu_guest_seconds_total{cpu="255",mode="nice"}`] != want {
			t.Errorf("cpu255 guest nice = %v, want %v", got[`node_cpu_guest_seconds_total{cpu="255",mode="nice"}`], want)
		}
	}
	if got["node_intr_total"] != 1234567890 {
		t.Errorf("node_intr_total = %v", got["node_intr_total"])
	}
}

func TestZeroAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for name, root := range map[string]string{"cpus=4": "testdata/basic", "cpus=256": writeRoot(t, genStat(256))} {
		p, _ := testutil.NewPlugin(t, "cpu", root, nil)
		if n := testutil.AllocsPerTick(t, p); n != 0 {
			t.Errorf("%s: allocs per tick = %v, want 0", name, n)
		}
	}
}

func writeRoot(tb testing.TB, stat string) string {
	tb.Helper()
	root := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc", "stat"), []byte(stat), 0o644); err != nil {
		tb.Fatal(err)
	}
	return root
}

func BenchmarkSample(b *testing.B) {
	for _, n := range []int{4, 256} {
		b.Run(fmt.Sprintf("cpus=%d", n), func(b *testing.B) {
			root := "testdata/basic"
			if n != 4 {
				root = writeRoot(b, genStat(n))
			}
			p, _ := testutil.NewPlugin(b, "cpu", root, nil)
			testutil.BenchTicks(b, p)
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n" + tail))
	f.Add([]byte("cpu0 1 2 3\ncpu1\ncpu 1\nbtime\nintr x\n"))
	f.Add([]byte("cpu18446744073709551616 1 2 3 4 5 6 7 8\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s cpu.Stat
		err := cpu.Parse(data, &s)
		for _, c := range s.CPUs {
			if c.ID < 0 || c.ID >= cpu.MaxCPU {
				t.Fatalf("CPU number %d out of range", c.ID)
			}
		}
		if err == nil && (len(s.CPUs) == 0 || s.Found != 63) {
			t.Fatalf("no error although content is incomplete: %+v", s)
		}
	})
}

// FuzzSample feeds two successive readings through the plugin: whatever
// they hold, it must not panic, emit a series twice, or let an exported
// counter of a CPU present in both readings go down unless idle jumped back.
func FuzzSample(f *testing.F) {
	f.Add([]byte("cpu0 1 2 3 400 5 6 7 8 9 10\ncpu1 1 2 3 4 5 6 7 8\n"+tail), []byte("cpu1 0 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8 9 10\n"+tail))
	f.Add([]byte("cpu3 1 2 3 4 5 6 7 8\ncpu3 1 2 3 4 5 6 7 8\n"), []byte("cpu65535 1 2 3 4 5 6 7 8\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fx := newFixture(t, string(a))
		first, _ := fx.sample()
		fx.Write(string(b))
		second, _ := fx.sample()
		for key, v := range second {
			old, ok := first[key]
			if !ok || v >= old || !strings.HasPrefix(key, "node_cpu") {
				continue
			}
			idle := key[:strings.Index(key, "mode=")] + `mode="idle"}`
			idle = strings.Replace(idle, "node_cpu_guest_seconds_total", "node_cpu_seconds_total", 1)
			if second[idle] >= first[idle] {
				t.Errorf("%s went from %v to %v while idle did not jump back", key, old, v)
			}
		}
	})
}
