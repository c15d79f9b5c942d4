package vmstat_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/config"
	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"github.com/vigil-hpc/vigil/internal/sampler/plugins/vmstat"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestFixtures(t *testing.T) { testutil.FixtureCases(t, "vmstat", nil) }

// nodeExporterDefault selects the same fields as node_exporter's default
// --collector.vmstat.fields on current kernels.
func nodeExporterDefault() sampler.Configurable {
	return &vmstat.Config{Fields: []string{"oom_kill", "pgpg", "pswp", "pgfault", "pgmajfault"}}
}

func TestFiltered(t *testing.T) {
	p, _ := testutil.NewPlugin(t, "vmstat", "testdata/basic", nodeExporterDefault())
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Unix(1700000000, 0), &b); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 7 {
		t.Errorf("%d series, want 7", b.Len())
	}
	testutil.Golden(t, "testdata/basic/want-filtered.txt", testutil.Render(t, &b))
}

func render(fs []vmstat.Field) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("%s=%d", f.Name, f.Value))
	}
	return strings.Join(parts, " ")
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{
			name: "plain",
			in:   "nr_free_pages 5767049\npgfault 17700996\noom_kill 3\n",
			want: "nr_free_pages=5767049 pgfault=17700996 oom_kill=3",
		},
		{
			name: "negative, tabs, blank lines, no final newline",
			in:   "nr_zone_write_pending -2\n\n\tpgpgin\t31",
			want: "nr_zone_write_pending=-2 pgpgin=31",
		},
		{
			name:    "bad lines are skipped, the rest parsed",
			in:      "a 1\nb\nc 1 2\nd x\ne 18446744073709551616\nf 6\n",
			want:    "a=1 f=6",
			wantErr: `line 2 "b": 1 fields, want "name value": unexpected format (and 3 more bad lines)`,
		},
		{name: "empty", in: "\n\n", wantErr: "no fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vmstat.Parse([]byte(tc.in), nil)
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
	if _, err := vmstat.Parse([]byte("a x\n"), nil); !errors.Is(err, kernfs.ErrSyntax) {
		t.Errorf("bad number: %v does not wrap kernfs.ErrSyntax", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		fields  []string
		wantErr string
	}{
		{fields: nil},
		{fields: []string{"pg", "oom_kill", "nr_"}},
		{fields: []string{"pg", ""}, wantErr: `fields[1] = ""`},
		{fields: []string{"pg*"}, wantErr: `fields[0] = "pg*": want letters, digits and _ only`},
		{fields: []string{"pg", "oom", "pg"}, wantErr: `"pg" listed twice`},
	} {
		err := (&vmstat.Config{Fields: tc.fields}).Validate()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Validate(%q) = %v, want error containing %q", tc.fields, err, tc.wantErr)
		}
	}
}

func TestConfigFile(t *testing.T) {
	f, err := config.Parse("good.toml", []byte("[plugins.vmstat]\nfields = [\"pgfault\", \"oom_kill\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Plugins["vmstat"].(*vmstat.Config).Fields; strings.Join(got, ",") != "pgfault,oom_kill" {
		t.Errorf("fields = %q", got)
	}
	for in, want := range map[string]string{
		"[plugins.vmstat]\nfields = [\"pg\", \"pg\"]\n": `bad.toml:1: plugins.vmstat: fields: "pg" listed twice`,
		"[plugins.vmstat]\nfields = \"pg\"\n":           "bad.toml:2",
		"[plugins.vmstat]\nfield = [\"pg\"]\n":          "bad.toml:2",
	} {
		if _, err := config.Parse("bad.toml", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: error = %v, want it to contain %q", in, err, want)
		}
	}
}

func TestSampleConfigParses(t *testing.T) {
	reg, _ := sampler.Lookup("vmstat")
	uncommented := strings.ReplaceAll(reg.SampleConfig, "# fields =", "fields =")
	for _, in := range []string{reg.SampleConfig, uncommented} {
		if _, err := config.Parse("sample.toml", []byte(in)); err != nil {
			t.Errorf("sample config does not parse: %v\n%s", err, in)
		}
	}
}

func TestInitRejectsBadConfig(t *testing.T) {
	reg, _ := sampler.Lookup("vmstat")
	p := reg.New(&vmstat.Config{Fields: []string{"a b"}})
	if err := p.Init(sampler.Env{FS: kernfs.NewFS(t.TempDir())}); err == nil {
		t.Error("Init accepted an invalid prefix")
	}
}

// fixture is the plugin on a writable temporary root.
type fixture struct{ *testutil.FileFixture }

func newFixture(t *testing.T, content string, cfg sampler.Configurable) *fixture {
	return &fixture{testutil.NewFileFixture(t, "vmstat", "proc/vmstat", content, cfg)}
}

func (f *fixture) sample() (string, error) {
	var b metric.Batch
	err := f.P.Sample(context.Background(), time.Unix(1700000000, 0), &b)
	var sb strings.Builder
	for _, s := range b.Samples() {
		fmt.Fprintf(&sb, "%s %s %v\n", s.Desc.Name, s.Desc.Type, s.Value)
	}
	return sb.String(), err
}

func TestSample(t *testing.T) {
	f := newFixture(t, "pgfault 10\nnr_dirty -1\n", nil)
	got, err := f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if want := "node_vmstat_pgfault untyped 10\nnode_vmstat_nr_dirty untyped -1\n"; got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}

	f.Write("pgfault 11\nnew_counter 1\nbad-name 5\npgfault 12\nbroken\n")
	got, err = f.sample()
	if want := "node_vmstat_pgfault untyped 11\nnode_vmstat_new_counter untyped 1\n"; got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	if err == nil || !strings.Contains(err.Error(), f.Path+`: line 5 "broken"`) {
		t.Errorf("error = %v, want it to name %s and line 5", err, f.Path)
	}
	f.Write("pgfault 11\nbad-name 5\n")
	if _, err := f.sample(); err == nil || !strings.Contains(err.Error(), `"bad-name" cannot be a metric name`) {
		t.Errorf("bad name: error = %v", err)
	}
	f.Write("pgfault 11\npgfault 12\n")
	if _, err := f.sample(); err == nil || !strings.Contains(err.Error(), "field pgfault listed twice") {
		t.Errorf("duplicate: error = %v", err)
	}

	if err := os.Remove(f.Path); err != nil {
		t.Fatal(err)
	}
	p, _ := testutil.NewPlugin(t, "vmstat", filepath.Dir(filepath.Dir(f.Path)), nil)
	var b metric.Batch
	if err := p.Sample(context.Background(), time.Now(), &b); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), f.Path) {
		t.Errorf("missing file: error = %v", err)
	}
}

func TestPrefixes(t *testing.T) {
	f := newFixture(t, "pgfault 1\npgmajfault 2\npgpgin 3\nnr_dirty 4\noom_kill 5\n", &vmstat.Config{Fields: []string{"pgp", "oom"}})
	got, err := f.sample()
	if err != nil {
		t.Fatal(err)
	}
	if want := "node_vmstat_pgpgin untyped 3\nnode_vmstat_oom_kill untyped 5\n"; got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
}

func TestSeriesBound(t *testing.T) {
	var sb strings.Builder
	for i := 0; i <= vmstat.MaxSeries; i++ {
		fmt.Fprintf(&sb, "f%d 1\n", i)
	}
	f := newFixture(t, sb.String(), nil)
	got, err := f.sample()
	if n := strings.Count(got, "\n"); n != vmstat.MaxSeries || err == nil || !strings.Contains(err.Error(), "more than 4096 distinct fields") {
		t.Errorf("%d series, error %v; want %d and the bound reported", n, err, vmstat.MaxSeries)
	}
}

func TestZeroAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for name, cfg := range map[string]sampler.Configurable{"all": nil, "filtered": nodeExporterDefault()} {
		p, _ := testutil.NewPlugin(t, "vmstat", "testdata/basic", cfg)
		if n := testutil.AllocsPerTick(t, p); n != 0 {
			t.Errorf("%s: allocs per tick = %v, want 0", name, n)
		}
	}
}

func BenchmarkSample(b *testing.B) {
	p, _ := testutil.NewPlugin(b, "vmstat", "testdata/basic", nil)
	testutil.BenchTicks(b, p)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("nr_free_pages 5767049\npgfault 17700996\noom_kill 3\n"))
	f.Add([]byte("a\nb 1 2\nc -\n d 9223372036854775808\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := vmstat.Parse(data, nil)
		for _, fl := range fields {
			if len(fl.Name) == 0 || !bytes.Contains(data, fl.Name) {
				t.Fatalf("field name %q not taken from the input", fl.Name)
			}
		}
		if err == nil && len(fields) == 0 {
			t.Fatal("no fields and no error")
		}
	})
}

// Lines that move between reads keep their names: the per-line cache of
// the previous read must not attach a value to the series of another line.
func TestLinesMove(t *testing.T) {
	f := newFixture(t, "a 1\nb 2\nc 3\n", nil)
	for _, tc := range []struct{ in, want string }{
		{"a 1\nb 2\nc 3\n", "node_vmstat_a untyped 1\nnode_vmstat_b untyped 2\nnode_vmstat_c untyped 3\n"},
		{"c 4\na 5\nb 6\n", "node_vmstat_c untyped 4\nnode_vmstat_a untyped 5\nnode_vmstat_b untyped 6\n"},
		{"a 7\nc 8\n", "node_vmstat_a untyped 7\nnode_vmstat_c untyped 8\n"},
		{"a 9\nb 10\nc 11\n", "node_vmstat_a untyped 9\nnode_vmstat_b untyped 10\nnode_vmstat_c untyped 11\n"},
	} {
		f.Write(tc.in)
		if got, err := f.sample(); err != nil || got != tc.want {
			t.Errorf("read %q: got\n%swant\n%s(err %v)", tc.in, got, tc.want, err)
		}
	}
}

// FuzzParseAsFields: Parse takes the same fields and values, and fails on
// the same inputs, as splitting each line at blanks and parsing the second
// field with strconv (its fast path for "name value" must not differ).
func FuzzParseAsFields(f *testing.F) {
	f.Add([]byte("nr_free_pages 5767049\npgfault 17700996\noom_kill 3\n"))
	f.Add([]byte("a\tb 1\n c 2\nd  3\ne 4 \nf +5\ng -6\nh 9223372036854775808\ni 1\r\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := vmstat.Parse(data, nil)
		var want []vmstat.Field
		bad := false
		for _, line := range bytes.Split(data, []byte("\n")) {
			fs := bytes.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
			if len(fs) == 0 {
				continue
			}
			v, perr := strconv.ParseInt(string(fs[1%len(fs)]), 10, 64)
			if len(fs) != 2 || perr != nil {
				bad = true
				continue
			}
			want = append(want, vmstat.Field{Name: fs[0], Value: v})
		}
		if len(got) != len(want) {
			t.Fatalf("%d fields, want %d: %q", len(got), len(want), data)
		}
		for i := range got {
			if !bytes.Equal(got[i].Name, want[i].Name) || got[i].Value != want[i].Value {
				t.Fatalf("field %d: %s=%d, want %s=%d", i, got[i].Name, got[i].Value, want[i].Name, want[i].Value)
			}
		}
		if (err != nil) != (bad || len(want) == 0) {
			t.Fatalf("error %v, want one: %v", err, bad || len(want) == 0)
		}
	})
}
