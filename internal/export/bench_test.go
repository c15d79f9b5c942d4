package export

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/server"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// benchTable is a chunk of nodes × cols series over steps, all present.
func benchTable(nodes, cols, steps int) *table {
	var series []map[string]string
	for n := range nodes {
		for c := range cols {
			series = append(series, map[string]string{"__name__": "node_cpu_seconds_total", "node": fmt.Sprintf("cn%05d", n), "cpu": fmt.Sprint(c / 8), "mode": fmt.Sprint("m", c%8)})
		}
	}
	t := newTable(series)
	t.reset(steps)
	for n := range t.nodes {
		for i := range t.vals[n] {
			t.vals[n][i] = float64(i) * 1.25
			t.present[n][i] = true
		}
	}
	return t
}

// BenchmarkExportCSV measures rows/s: "rows" assembles and writes CSV rows
// of 200 columns from a filled chunk; "server" is a whole export from an
// in-process server (series listing, query_range, JSON decoding, CSV).
func BenchmarkExportCSV(b *testing.B) {
	b.Run("rows/cols=200", func(b *testing.B) {
		const nodes, cols, steps = 50, 200, 60
		t := benchTable(nodes, cols, steps)
		w, err := newCSVWriter(io.Discard, t.columns)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		rows := 0
		for b.Loop() {
			n, err := t.writeRows(w, 0, 1000, steps)
			if err != nil {
				b.Fatal(err)
			}
			rows += n
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(rows*cols)/b.Elapsed().Seconds(), "cells/s")
	})
	b.Run("server/nodes=20,cols=50,steps=600", func(b *testing.B) {
		const nodes, cols, steps = 20, 50, 600
		srv := benchServer(b, nodes, cols, steps)
		b.ReportAllocs()
		rows := 0
		for b.Loop() {
			sum, err := Run(context.Background(), Options{Server: srv, Match: "{__name__=~\"bench_.*\"}", From: benchBase,
				To: benchBase.Add((steps - 1) * time.Second), Format: CSV, Out: "-", Stdout: io.Discard})
			if err != nil {
				b.Fatal(err)
			}
			rows += sum.Rows
		}
		b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	})
}

var benchBase = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func benchServer(b *testing.B, nodes, cols, steps int) string {
	cfg := server.DefaultConfig()
	cfg.Data = b.TempDir()
	s, err := server.New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	descs := make([]*metric.Desc, cols)
	for i := range descs {
		descs[i] = metric.NewDesc(fmt.Sprint("bench_", i%5), "", metric.Gauge, "i", fmt.Sprint(i))
	}
	vals := make([]float64, cols)
	for k := range steps {
		for n := range nodes {
			for i := range vals {
				vals[i] = float64(k*i+n) / 8
			}
			if err := s.Store().AppendTick(fmt.Sprintf("cn%05d", n), benchBase.Add(time.Duration(k)*time.Second), descs, vals, false); err != nil {
				b.Fatal(err)
			}
		}
	}
	hs := httptest.NewServer(s.Handler())
	b.Cleanup(func() { hs.Close(); s.Close() })
	return hs.URL
}

func BenchmarkExportParquet(b *testing.B) {
	const nodes, cols, steps = 50, 200, 60
	t := benchTable(nodes, cols, steps)
	w := newParquetWriter(io.Discard, t.columns, nil, DefaultCellBudget)
	b.ReportAllocs()
	rows := 0
	for b.Loop() {
		n, err := t.writeRows(w, 0, 1000, steps)
		if err != nil {
			b.Fatal(err)
		}
		rows += n
	}
	if err := w.finish(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

func TestCSVRowAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	tb := benchTable(3, 10, 4)
	w, err := newCSVWriter(io.Discard, tb.columns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.writeRows(w, 0, 1000, 4); err != nil { // warm the buffers
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(50, func() { _, _ = tb.writeRows(w, 0, 1000, 4) }); a != 0 {
		t.Errorf("writing CSV rows allocates %v times per chunk, want 0", a)
	}
}

func TestColumnName(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]string
		want string
	}{
		{map[string]string{"__name__": "node_load1", "node": "cn01"}, "node_load1"},
		{map[string]string{"__name__": "c", "node": "n", "mode": "idle", "cpu": "0"}, `c{cpu="0",mode="idle"}`},
		{map[string]string{"__name__": "m", "path": "a\\b\"c\nd"}, `m{path="a\\b\"c\nd"}`},
		{map[string]string{"__name__": "c", "node": "n", "job": "node", "instance": "n", "cpu": "0"}, `c{cpu="0"}`},
		{map[string]string{"__name__": "c", "node": "n", "job": "fed", "instance": "other:9100"}, `c{instance="other:9100",job="fed"}`},
	} {
		if got := ColumnName(tc.in); got != tc.want {
			t.Errorf("ColumnName(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFillRejects(t *testing.T) {
	tb := newTable([]map[string]string{{"__name__": "m", "node": "a"}})
	tb.reset(2)
	for _, tc := range []struct{ data, want string }{
		{`{"resultType":"vector","result":[]}`, "want matrix"},
		{`{"resultType":"matrix","result":[{"metric":{"node":"a"},"values":[[0,"1"]]}]}`, "no metric name"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[0.5,"1"]]}]}`, "not one of the requested steps"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[2,"1"]]}]}`, "not one of the requested steps"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[1,"x"]]}]}`, `value "x"`},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[1,1]]}]}`, "want a quoted value"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[1,"1"]] x}]}`, "decode result"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[1,"1"]}]}`, "decode result"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[1,"1"],]}]}`, "decode result"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[["1","1"]]}]}`, "bad timestamp"},
		{`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":{}}]}`, "want ["},
		{`{"resultType":"matrix"`, "decode result"},
	} {
		err := fillJSON(tb, tc.data, 0, 1000, 2)
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("fill(%s) = %v, want %q", tc.data, err, tc.want)
		}
	}
	if err := fillJSON(tb, `{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[1,"-Inf"]]},{"metric":{"__name__":"new","node":"a"},"values":[[1,"2"]]}]}`, 0, 1000, 2); err != nil {
		t.Fatal(err)
	}
	if !tb.present[0][1] || !math.IsInf(tb.vals[0][1], -1) || tb.present[0][0] {
		t.Errorf("cells = %v %v, want only step 1 = -Inf", tb.vals[0], tb.present[0])
	}
}

// fillJSON decodes an answer's data as the client does, then fills.
func fillJSON(tb *table, data string, cs, stepMs int64, steps int) error {
	var m matrix
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		return fmt.Errorf("decode result: %w", err)
	}
	return tb.fill(&m, cs, stepMs, steps)
}

// FuzzParsePoints: hostile point lists give errors, never panics, and
// what parses is what a JSON decoder reads.
func FuzzParsePoints(f *testing.F) {
	f.Add(`[[1795348800.5,"1.25"],[1795348801,"NaN"]]`)
	f.Add(`[ [ 1 , "+Inf" ] ]`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		var got [][2]float64
		err := parsePoints([]byte(s), func(ms int64, v float64) error {
			got = append(got, [2]float64{float64(ms), v})
			return nil
		})
		if err != nil {
			return
		}
		var ref [][2]json.RawMessage
		if json.Unmarshal([]byte(s), &ref) != nil {
			return // we may accept what strict JSON would not, e.g. inf spelled differently
		}
		if len(ref) != len(got) {
			t.Fatalf("%q: parsed %d points, JSON has %d", s, len(got), len(ref))
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// FuzzFill feeds arbitrary API answers to the matrix decoder: errors are
// fine, panics and writes outside the chunk are not.
func FuzzFill(f *testing.F) {
	f.Add(`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"a"},"values":[[1,"2.5"],[0,"NaN"]]}]}`)
	f.Add(`{"resultType":"matrix","result":[{"metric":{"__name__":"m","node":"b","x":"y"},"values":[[1e300,"1"]]}]}`)
	f.Fuzz(func(t *testing.T, data string) {
		tb := newTable([]map[string]string{{"__name__": "m", "node": "a"}, {"__name__": "m", "node": "b", "x": "y"}})
		tb.reset(3)
		_ = fillJSON(tb, data, 1000, 1000, 3)
		for n := range tb.nodes {
			if len(tb.vals[n]) != 3 || len(tb.present[n]) != 3 {
				t.Fatalf("chunk of node %d resized to %d", n, len(tb.vals[n]))
			}
		}
	})
}
