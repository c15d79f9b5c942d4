package export_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/vigil-hpc/vigil/internal/export"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/server"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

var base = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// startServer serves a store holding 5 ticks of two nodes:
//
//	node_load1                                      cn01: k+0.5 (no tick k=2); cn02: 10+k+0.5, NaN at k=3
//	node_cpu_seconds_total{cpu="0",mode="idle"}     2k on cn01, 100+2k on cn02
//	node_cpu_seconds_total{cpu="0",mode="user"}     0.25k on cn01, 1+0.25k on cn02
//	node_gpu_temp{gpu="0"}                          cn02 only: 40+k, +Inf at k=4
func startServer(t testing.TB) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Data = t.TempDir()
	s, err := server.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	load := metric.NewDesc("node_load1", "", metric.Gauge)
	idle := metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", "0", "mode", "idle")
	user := metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "mode", "user", "cpu", "0")
	gpu := metric.NewDesc("node_gpu_temp", "", metric.Gauge, "gpu", "0")
	for k := range 5 {
		ts := base.Add(time.Duration(k) * time.Second)
		fk := float64(k)
		if k != 2 {
			if err := s.Store().AppendTick("cn01", ts, []*metric.Desc{load, idle, user}, []float64{fk + 0.5, 2 * fk, 0.25 * fk}, false); err != nil {
				t.Fatal(err)
			}
		}
		l, g := 10+fk+0.5, 40+fk
		if k == 3 {
			l = math.NaN()
		}
		if k == 4 {
			g = math.Inf(1)
		}
		if err := s.Store().AppendTick("cn02", ts, []*metric.Desc{load, idle, user, gpu}, []float64{l, 100 + 2*fk, 1 + 0.25*fk, g}, false); err != nil {
			t.Fatal(err)
		}
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return hs.URL
}

func run(t testing.TB, o export.Options) (export.Summary, error) {
	t.Helper()
	if o.Match == "" {
		o.Match = `{__name__=~"node_.*"}`
	}
	if o.From.IsZero() {
		o.From, o.To = base, base.Add(4*time.Second)
	}
	return export.Run(context.Background(), o)
}

const header = `time,node,"node_cpu_seconds_total{cpu=""0"",mode=""idle""}","node_cpu_seconds_total{cpu=""0"",mode=""user""}","node_gpu_temp{gpu=""0""}",node_load1` + "\n"

// wantCSV is every cell of the 1s export, written out by hand.
const wantCSV = header +
	"2026-11-22T12:00:00.000Z,cn01,0,0,,0.5\n" +
	"2026-11-22T12:00:00.000Z,cn02,100,1,40,10.5\n" +
	"2026-11-22T12:00:01.000Z,cn01,2,0.25,,1.5\n" +
	"2026-11-22T12:00:01.000Z,cn02,102,1.25,41,11.5\n" +
	"2026-11-22T12:00:02.000Z,cn02,104,1.5,42,12.5\n" +
	"2026-11-22T12:00:03.000Z,cn01,6,0.75,,3.5\n" +
	"2026-11-22T12:00:03.000Z,cn02,106,1.75,43,NaN\n" +
	"2026-11-22T12:00:04.000Z,cn01,8,1,,4.5\n" +
	"2026-11-22T12:00:04.000Z,cn02,108,2,inf,14.5\n"

func TestCSV(t *testing.T) {
	srv := startServer(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "x.csv")
	sum, err := run(t, export.Options{Server: srv, Format: export.CSV, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != wantCSV {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, wantCSV)
	}
	if sum.Rows != 9 || sum.Series != 7 || sum.Columns != 4 || sum.Nodes != 2 {
		t.Errorf("summary %+v, want 9 rows, 7 series, 4 columns, 2 nodes", sum)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}

	// Chunked into one step and one node per query, the result is the same.
	small := filepath.Join(dir, "small.csv")
	sum, err = run(t, export.Options{Server: srv, Format: export.CSV, Out: small, CellBudget: 1, MaxSeriesPerQuery: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(small); string(got) != wantCSV {
		t.Errorf("chunked CSV:\n%s\nwant:\n%s", got, wantCSV)
	}
	if sum.Queries != 5*2 {
		t.Errorf("chunked export ran %d queries, want 10 (5 steps × 2 nodes)", sum.Queries)
	}
}

// TestStep checks the cell semantics: the last sample in (t-step, t], so
// cn01 at 12:00:02, whose tick is missing, shows its 12:00:01 values.
func TestStep(t *testing.T) {
	srv := startServer(t)
	var buf bytes.Buffer
	_, err := run(t, export.Options{Server: srv, Format: export.CSV, Out: "-", Stdout: &buf, Step: 2 * time.Second,
		Match: `node_load1`, From: base.Add(-500 * time.Millisecond), To: base.Add(5 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	want := "time,node,node_load1\n" +
		"2026-11-22T12:00:00.000Z,cn01,0.5\n2026-11-22T12:00:00.000Z,cn02,10.5\n" +
		"2026-11-22T12:00:02.000Z,cn01,1.5\n2026-11-22T12:00:02.000Z,cn02,12.5\n" +
		"2026-11-22T12:00:04.000Z,cn01,4.5\n2026-11-22T12:00:04.000Z,cn02,14.5\n"
	if buf.String() != want {
		t.Errorf("step 2s:\n%s\nwant:\n%s", buf.String(), want)
	}
}

type cell struct {
	null bool
	v    float64
}

func TestParquet(t *testing.T) {
	srv := startServer(t)
	out := filepath.Join(t.TempDir(), "x.parquet")
	if _, err := run(t, export.Options{Server: srv, Format: export.Parquet, Out: out}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pf.Schema().Columns() {
		names = append(names, strings.Join(p, "."))
	}
	wantNames := []string{"time", "node", `node_cpu_seconds_total{cpu="0",mode="idle"}`, `node_cpu_seconds_total{cpu="0",mode="user"}`, `node_gpu_temp{gpu="0"}`, "node_load1"}
	if strings.Join(names, " ") != strings.Join(wantNames, " ") {
		t.Fatalf("columns %q, want %q", names, wantNames)
	}
	r := parquet.NewReader(f)
	defer r.Close()
	rows := make([]parquet.Row, 20)
	n, err := r.ReadRows(rows)
	if err != nil && n == 0 {
		t.Fatal(err)
	}
	null := cell{null: true}
	nan, inf := cell{v: math.NaN()}, cell{v: math.Inf(1)}
	c := func(v float64) cell { return cell{v: v} }
	want := []struct {
		sec  int
		node string
		vals []cell
	}{
		{0, "cn01", []cell{c(0), c(0), null, c(0.5)}},
		{0, "cn02", []cell{c(100), c(1), c(40), c(10.5)}},
		{1, "cn01", []cell{c(2), c(0.25), null, c(1.5)}},
		{1, "cn02", []cell{c(102), c(1.25), c(41), c(11.5)}},
		{2, "cn02", []cell{c(104), c(1.5), c(42), c(12.5)}},
		{3, "cn01", []cell{c(6), c(0.75), null, c(3.5)}},
		{3, "cn02", []cell{c(106), c(1.75), c(43), nan}},
		{4, "cn01", []cell{c(8), c(1), null, c(4.5)}},
		{4, "cn02", []cell{c(108), c(2), inf, c(14.5)}},
	}
	if n != len(want) {
		t.Fatalf("%d rows, want %d", n, len(want))
	}
	for i, w := range want {
		row := rows[i]
		if got := row[0].Int64(); got != base.Add(time.Duration(w.sec)*time.Second).UnixMilli() {
			t.Errorf("row %d time = %d, want +%ds", i, got, w.sec)
		}
		if got := string(row[1].ByteArray()); got != w.node {
			t.Errorf("row %d node = %q, want %q", i, got, w.node)
		}
		for j, wc := range w.vals {
			v := row[2+j]
			switch {
			case wc.null != v.IsNull():
				t.Errorf("row %d column %s: null=%v, want %v", i, wantNames[2+j], v.IsNull(), wc.null)
			case !wc.null && math.Float64bits(v.Double()) != math.Float64bits(wc.v) && !(math.IsNaN(wc.v) && math.IsNaN(v.Double())):
				t.Errorf("row %d column %s = %v, want %v", i, wantNames[2+j], v.Double(), wc.v)
			}
		}
	}
}

// TestPandas reads both formats with pandas, as an analyst would.
func TestPandas(t *testing.T) {
	py := testutil.LookPeer(t, "python3", "apt-get install python3")
	if err := exec.Command(py, "-c", "import pandas, pyarrow").Run(); err != nil {
		testutil.MissingPeer(t, "pandas or pyarrow not installed (pip install pandas pyarrow)")
	}
	srv := startServer(t)
	dir := t.TempDir()
	for _, f := range []string{export.CSV, export.Parquet} {
		if _, err := run(t, export.Options{Server: srv, Format: f, Out: filepath.Join(dir, "x."+f)}); err != nil {
			t.Fatal(err)
		}
	}
	script := `
import sys, pandas as pd
d = sys.argv[1]
for df in (pd.read_csv(d + "/x.csv", parse_dates=["time"]), pd.read_parquet(d + "/x.parquet")):
    df["time"] = pd.to_datetime(df["time"], utc=True)
    print(list(df.columns))
    print(len(df), df["node_load1"].sum(), df['node_gpu_temp{gpu="0"}'].isna().sum(), df['node_gpu_temp{gpu="0"}'].max())
    r = df[(df.node == "cn02") & (df.time == pd.Timestamp("2026-11-22T12:00:02Z"))]
    print(r['node_cpu_seconds_total{cpu="0",mode="user"}'].iloc[0], str(df.dtypes["node_load1"]))
`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("pandas: %v\n%s", err, out)
	}
	// load sum skips the NaN: 0.5+1.5+3.5+4.5 + 10.5+11.5+12.5+14.5 = 59; four
	// cn01 rows lack a GPU; the max is +Inf.
	one := `['time', 'node', 'node_cpu_seconds_total{cpu="0",mode="idle"}', 'node_cpu_seconds_total{cpu="0",mode="user"}', 'node_gpu_temp{gpu="0"}', 'node_load1']
9 59.0 4 inf
1.5 float64
`
	if string(out) != one+one {
		t.Errorf("pandas read:\n%s\nwant:\n%s", out, one+one)
	}
}

func TestErrors(t *testing.T) {
	srv := startServer(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "x.csv")
	for _, tc := range []struct {
		name string
		o    export.Options
		want string
		is   error
	}{
		{"bad selector", export.Options{Match: "node_load1{"}, "bad selector", nil},
		{"no series", export.Options{Match: "nothing_here"}, "no series match nothing_here", export.ErrNoData},
		{"no samples", export.Options{Match: `node_load1{node="cn01"}`, From: base.Add(2 * time.Second), To: base.Add(2 * time.Second)}, "none has samples", export.ErrNoData},
		{"no series in range", export.Options{From: base.Add(time.Hour), To: base.Add(2 * time.Hour)}, "no series match", export.ErrNoData},
		{"unwritable", export.Options{Out: filepath.Join(dir, "missing", "x.csv")}, "create " + filepath.Join(dir, "missing", "x.csv"), nil},
		{"format", export.Options{Format: "xlsx"}, `unknown format "xlsx"`, nil},
		{"order", export.Options{From: base, To: base.Add(-time.Second)}, "before --from", nil},
		{"server down", export.Options{Server: "http://127.0.0.1:1"}, "127.0.0.1:1", nil},
		{"bad server URL", export.Options{Server: "ftp://x"}, `server URL "ftp://x"`, nil},
		{"answer too large", export.Options{MaxResponse: 100}, "larger than the limit of 100 bytes", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			if o.Server == "" {
				o.Server = srv
			}
			if o.Format == "" {
				o.Format = export.CSV
			}
			if o.Out == "" {
				o.Out = out
			}
			_, err := run(t, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tc.is)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("failed export left files: %v", ents)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"now", now, true},
		{"now-1h", now.Add(-time.Hour), true},
		{"now+90s", now.Add(90 * time.Second), true},
		{"now-1d12h", now.Add(-36 * time.Hour), true},
		{"2026-11-22T12:00:00Z", base, true},
		{"2026-11-22T13:00:00+01:00", base, true},
		{"1795348800", base, true},
		{"1795348800.250", base.Add(250 * time.Millisecond), true},
		{"now*2", time.Time{}, false},
		{"now-", time.Time{}, false},
		{"now-1x", time.Time{}, false},
		{"yesterday", time.Time{}, false},
		{"", time.Time{}, false},
	} {
		got, err := export.ParseTime(tc.in, now)
		if (err == nil) != tc.ok || !got.Equal(tc.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParseTime(%q) error %q does not name the input", tc.in, err)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"now", "now-1h", "1795348800.5", "2026-11-22T12:00:00Z", "now+1y2w", "now-9999999999y"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 22, 15, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := export.ParseTime(s, now); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}
