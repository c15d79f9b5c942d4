package memory_test

import (
	"bytes"
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
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/memory"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "memory", nil) }

// render shows parsed fields as "name=value[kB]" for compact comparison.
func render(fs []memory.Field) string {
	var parts []string
	for _, f := range fs {
		unit := ""
		if f.KB {
			unit = "kB"
		}
		parts = append(parts, fmt.Sprintf("%s=%d%s", f.Name, f.Value, unit))
	}
	return strings.Join(parts, " ")
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{
			name: "units and counts",
			in:   "MemTotal:       263754332 kB\nActive(anon):    6012876 kB\nHugePages_Total:    4096\nHugepagesize:       2048 kB\n",
			want: "MemTotal=263754332kB Active(anon)=6012876kB HugePages_Total=4096 Hugepagesize=2048kB",
		},
		{
			name: "no space after colon, tabs, blank line, no final newline",
			in:   "MemFree:123 kB\n\nFoo:\t7",
			want: "MemFree=123kB Foo=7",
		},
		{
			name:    "bad lines are skipped, the rest parsed",
			in:      "MemTotal: 10 kB\nMemFree: x kB\nCached 5 kB\nDirty: 3 MB\nShmem: 4 kB junk\nSlab: 9 kB\n",
			want:    "MemTotal=10kB Slab=9kB",
			wantErr: `line 2 "MemFree: x kB": value "x": invalid number (and 3 more bad lines)`,
		},
		{
			name:    "missing value",
			in:      "MemTotal:\n",
			wantErr: `line 1 "MemTotal:": value "": invalid number`,
		},
		{
			name:    "name with a blank",
			in:      "Mem Total: 1 kB\n",
			wantErr: `line 1 "Mem Total: 1 kB": want "Name: value [kB]"`,
		},
		{name: "empty", in: "", wantErr: "no fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memory.Parse([]byte(tc.in), nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			}
			if r := render(got); r != tc.want {
				t.Errorf("got  %s\nwant %s", r, tc.want)
			}
		})
	}
}

func TestParseErrorsWrap(t *testing.T) {
	if _, err := memory.Parse([]byte("A: 1 GB\n"), nil); !errors.Is(err, memory.ErrFormat) {
		t.Errorf("bad unit: %v does not wrap ErrFormat", err)
	}
	if _, err := memory.Parse([]byte("A: 1x kB\n"), nil); !errors.Is(err, kernfs.ErrSyntax) {
		t.Errorf("bad number: %v does not wrap kernfs.ErrSyntax", err)
	}
}

func TestMetricKey(t *testing.T) {
	for in, want := range map[string]string{
		"MemTotal":       "MemTotal",
		"Active(anon)":   "Active_anon",
		"Inactive(file)": "Inactive_file",
		"NFS_Unstable":   "NFS_Unstable",
		"A(b)c":          "A_bc",
		"A(b)(c)":        "", // "A_b)(c" as in node_exporter, not a valid name
		"DirectMap4k":    "DirectMap4k",
		"A)b(":           "",
		"Foo.bar":        "",
		"Grüße":          "",
		"":               "",
	} {
		got, ok := memory.MetricKey([]byte(in))
		if got != want || ok != (want != "") {
			t.Errorf("MetricKey(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// fixture is the plugin on a writable temporary root.
type fixture struct{ *testutil.FileFixture }

func newFixture(t *testing.T, content string) *fixture {
	return &fixture{testutil.NewFileFixture(t, "memory", "proc/meminfo", content, nil)}
}

// sample returns the series of one tick as "name value" lines in order.
func (f *fixture) sample() (string, error) {
	var b metric.Batch
	err := f.P.Sample(context.Background(), time.Unix(1700000000, 0), &b)
	var sb strings.Builder
	for _, s := range b.Samples() {
		fmt.Fprintf(&sb, "%s %v\n", s.Desc.Name, s.Value)
	}
	return sb.String(), err
}

func TestSample(t *testing.T) {
	f := newFixture(t, "MemTotal: 3 kB\nActive(anon): 2 kB\nHugePages_Total: 5\n")
	got, err := f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if want := "node_memory_MemTotal_bytes 3072\nnode_memory_Active_anon_bytes 2048\nnode_memory_HugePages_Total 5\n"; got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}

	// A new kernel field appears, a bad line is skipped but reported,
	// and a field whose spelling collides with another is not exported twice.
	f.Write("MemTotal: 4 kB\nNewThing: 1 kB\nBogus: 1 parsec\nActive(anon): 2 kB\nActive_anon: 9 kB\nMemTotal: 4 kB\n")
	got, err = f.sample()
	if want := "node_memory_MemTotal_bytes 4096\nnode_memory_NewThing_bytes 1024\nnode_memory_Active_anon_bytes 2048\n"; got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), f.Path+`: line 3 "Bogus: 1 parsec"`) {
		t.Errorf("error = %v, want it to name %s and line 3", err, f.Path)
	}

	f.Write("MemTotal: 4 kB\nActive_anon: 9 kB\nMemTotal: 5 kB\n")
	if _, err := f.sample(); err == nil || !strings.Contains(err.Error(), "field MemTotal listed twice") {
		t.Errorf("duplicate: error = %v", err)
	}
	f.Write("MemTotal: 4\n")
	if _, err := f.sample(); err == nil || !strings.Contains(err.Error(), "field MemTotal changed unit") {
		t.Errorf("unit change: error = %v", err)
	}
	f.Write("Weird.Name: 4 kB\nMemFree: 1 kB\n")
	got, err = f.sample()
	if err == nil || !strings.Contains(err.Error(), `"Weird.Name" cannot be a metric name`) || got != "node_memory_MemFree_bytes 1024\n" {
		t.Errorf("bad name: got %q, error = %v", got, err)
	}

	if err := os.Remove(f.Path); err != nil {
		t.Fatal(err)
	}
	p, _ := testutil.NewPlugin(t, "memory", filepath.Dir(filepath.Dir(f.Path)), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), f.Path) {
		t.Errorf("missing file: error = %v", err)
	}
}

func TestSeriesBound(t *testing.T) {
	f := newFixture(t, "F0_0: 1 kB\n")
	for round := 0; round < 3; round++ {
		var sb strings.Builder
		for i := 0; i < memory.MaxSeries/2; i++ {
			fmt.Fprintf(&sb, "F%d_%d: 1 kB\n", round, i)
		}
		f.Write(sb.String())
		got, err := f.sample()
		n := strings.Count(got, "\n")
		if round < 2 && (err != nil || n != memory.MaxSeries/2) {
			t.Fatalf("round %d: %d series, err %v", round, n, err)
		}
		if round == 2 && (err == nil || !strings.Contains(err.Error(), "more than 1024 distinct fields")) {
			t.Errorf("round %d: %d series, err %v; want the bound to be reported", round, n, err)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	testutil.ZeroAllocs(t, "memory", "testdata/basic", nil)
}

func BenchmarkSample(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "memory", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("MemTotal:       263754332 kB\nActive(anon):    6012876 kB\nHugePages_Total:    4096\n"))
	f.Add([]byte("A:\nB: 1 2 3\n:5\nC: -1 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := memory.Parse(data, nil)
		for _, fl := range fields {
			if len(fl.Name) == 0 || !bytes.Contains(data, fl.Name) {
				t.Fatalf("field name %q not taken from a line of the input", fl.Name)
			}
			memory.MetricKey(fl.Name)
		}
		if err == nil && len(fields) == 0 {
			t.Fatal("no fields and no error")
		}
	})
}

// Lines that move between reads keep their names: the per-line cache of
// the previous read must not attach a value to the series of another line.
func TestLinesMove(t *testing.T) {
	f := newFixture(t, "A: 1 kB\nB: 2\n")
	for _, tc := range []struct{ in, want string }{
		{"A: 1 kB\nB: 2\n", "node_memory_A_bytes 1024\nnode_memory_B 2\n"},
		{"B: 3\nA: 4 kB\n", "node_memory_B 3\nnode_memory_A_bytes 4096\n"},
		{"C(x): 5 kB\nA: 6 kB\nB: 7\n", "node_memory_C_x_bytes 5120\nnode_memory_A_bytes 6144\nnode_memory_B 7\n"},
		{"A: 8 kB\nB: 9\n", "node_memory_A_bytes 8192\nnode_memory_B 9\n"},
	} {
		f.Write(tc.in)
		if got, err := f.sample(); err != nil || got != tc.want {
			t.Errorf("read %q: got\n%swant\n%s(err %v)", tc.in, got, tc.want, err)
		}
	}
}
