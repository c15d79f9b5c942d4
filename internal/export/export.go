// Package export is `vigil export`: it reads series from a server's
// Prometheus API and writes them as a table, one row per (time, node) and
// one column per series (metric name plus its labels other than node), in
// CSV or Parquet. It fetches the data in chunks of series and time so the
// memory used does not grow with the length of the export.
package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/vigil-hpc/vigil/internal/apiclient"
)

// Defaults of Options fields left zero.
const (
	DefaultStep = time.Second
	// DefaultCellBudget bounds the cells (series × steps) held at once,
	// about 9 bytes each.
	DefaultCellBudget = 2 << 20
	// DefaultMaxSeriesPerQuery bounds the series one query_range asks for.
	DefaultMaxSeriesPerQuery = 2000
	// maxStepsPerQuery stays below the API's 11,000 points per series.
	maxStepsPerQuery = 10_000
)

// ErrNoData is returned (wrapped) when the selector matches no series or
// the series have no samples in the range.
var ErrNoData = errors.New("no data")

// Options of one export.
type Options struct {
	Server string // base URL of a vigil server or Prometheus
	HTTP   *http.Client
	Match  string // series selector, e.g. node_load1 or {__name__=~"node_cpu.*"}
	From   time.Time
	To     time.Time
	Step   time.Duration
	Format string // CSV or Parquet
	// Out is the file to write; it appears only when the export succeeded
	// (written beside it under a temporary name, then renamed). "-" writes
	// to Stdout.
	Out    string
	Stdout io.Writer
	// Progress, if set, receives a progress line; TTY makes it one line
	// updated in place.
	Progress io.Writer
	TTY      bool

	CellBudget        int
	MaxSeriesPerQuery int
	// A nil HTTP is a plain client; apiclient.NewHTTPClient adds
	// credentials and TLS. Timeout bounds each request (0:
	// apiclient.DefaultTimeout).
	Timeout time.Duration
	// MaxResponse bounds the bytes of one answer (0: apiclient.DefaultMaxResponse).
	MaxResponse int64
}

// Summary describes a finished export.
type Summary struct {
	Series, Columns, Nodes, Rows, Queries int
	Elapsed                               time.Duration
}

// Run performs one export.
func Run(ctx context.Context, o Options) (Summary, error) {
	start := time.Now()
	var sum Summary
	if o.Step == 0 {
		o.Step = DefaultStep
	}
	if o.CellBudget <= 0 {
		o.CellBudget = DefaultCellBudget
	}
	if o.MaxSeriesPerQuery <= 0 {
		o.MaxSeriesPerQuery = DefaultMaxSeriesPerQuery
	}
	switch {
	case o.Step < time.Millisecond:
		return sum, fmt.Errorf("step %s: must be at least 1ms", o.Step)
	case o.To.Before(o.From):
		return sum, fmt.Errorf("--to %s is before --from %s", fmtTime(o.To), fmtTime(o.From))
	case o.Format != CSV && o.Format != Parquet:
		return sum, fmt.Errorf("unknown format %q: want %s or %s", o.Format, CSV, Parquet)
	case o.Out == "":
		return sum, errors.New("no output file given")
	}
	matchers, err := parser.ParseMetricSelector(o.Match)
	if err != nil {
		return sum, fmt.Errorf("bad selector %q: %w", o.Match, err)
	}
	stepMs := o.Step.Milliseconds()
	first := ceilDiv(o.From.UnixMilli(), stepMs) * stepMs
	last := floorDiv(o.To.UnixMilli(), stepMs) * stepMs
	if first > last {
		return sum, fmt.Errorf("range %s to %s holds no multiple of the step %s", fmtTime(o.From), fmtTime(o.To), o.Step)
	}

	// Create the file before asking the server anything, so an unwritable
	// path fails at once.
	out, commit, abort, err := createOutput(o.Out, o.Stdout)
	if err != nil {
		return sum, err
	}
	defer abort()

	ac, err := apiclient.New(apiclient.Options{Server: o.Server, HTTP: o.HTTP, Timeout: o.Timeout, MaxResponse: o.MaxResponse})
	if err != nil {
		return sum, err
	}
	c := client{ac}
	series, err := c.series(ctx, o.Match, time.UnixMilli(first-stepMs+1), time.UnixMilli(last))
	if err != nil {
		return sum, err
	}
	if len(series) == 0 {
		return sum, fmt.Errorf("%w: no series match %s between %s and %s", ErrNoData, o.Match, fmtTime(o.From), fmtTime(o.To))
	}
	t := newTable(series)
	sum.Series, sum.Columns, sum.Nodes = t.nseries, len(t.columns), len(t.nodes)
	groups := t.groups(matchers, o.MaxSeriesPerQuery, o.Step)

	chunkSteps := int64(min(max(o.CellBudget/t.nseries, 1), maxStepsPerQuery))
	nSteps := (last-first)/stepMs + 1
	meta := map[string]string{"vigil.selector": o.Match, "vigil.step": o.Step.String(), "vigil.server": o.Server}
	rw, err := newRowWriter(o.Format, out, t.columns, meta, o.CellBudget)
	if err != nil {
		return sum, err
	}
	prog := newProgress(o.Progress, o.TTY, int(nSteps)*len(groups))
	var m matrix
	for cs := first; cs <= last; cs += chunkSteps * stepMs {
		steps := min(chunkSteps, (last-cs)/stepMs+1)
		t.reset(int(steps))
		for _, g := range groups {
			m = matrix{}
			err := c.queryRange(ctx, g, time.UnixMilli(cs), time.UnixMilli(cs+(steps-1)*stepMs), o.Step, &m)
			sum.Queries++
			if err != nil {
				return sum, fmt.Errorf("query %s: %w", g, err)
			}
			if err := t.fill(&m, cs, stepMs, int(steps)); err != nil {
				return sum, fmt.Errorf("answer to %s from %s: %w", g, o.Server, err)
			}
			prog.add(int(steps), 0)
		}
		n, err := t.writeRows(rw, cs, stepMs, int(steps))
		sum.Rows += n
		if err != nil {
			return sum, fmt.Errorf("write %s: %w", o.Out, err)
		}
		prog.add(0, n)
		if err := ctx.Err(); err != nil {
			return sum, err
		}
	}
	prog.finish()
	if sum.Rows == 0 {
		return sum, fmt.Errorf("%w: %d series match %s but none has samples between %s and %s", ErrNoData, t.nseries, o.Match, fmtTime(o.From), fmtTime(o.To))
	}
	if err := rw.finish(); err != nil {
		return sum, fmt.Errorf("write %s: %w", o.Out, err)
	}
	if err := commit(); err != nil {
		return sum, err
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

// createOutput opens a temporary file beside path; commit renames it to
// path, abort (deferred, harmless after commit) removes it.
func createOutput(path string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "-" {
		if stdout == nil {
			stdout = os.Stdout
		}
		return stdout, func() error { return nil }, func() {}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create %s: %w", path, err)
	}
	done := false
	commit = func() error {
		// CreateTemp makes the file private; an export is an ordinary file.
		if err := f.Chmod(0o644); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		if err := os.Rename(f.Name(), path); err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		done = true
		return nil
	}
	abort = func() {
		if !done {
			f.Close()
			os.Remove(f.Name())
		}
	}
	return f, commit, abort, nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// client adds the export's calls to the API client.
type client struct{ *apiclient.Client }

func (c client) series(ctx context.Context, match string, start, end time.Time) ([]map[string]string, error) {
	var data []map[string]string
	err := c.Query(ctx, "/api/v1/series", url.Values{"match[]": {match}, "start": {unixSeconds(start)}, "end": {unixSeconds(end)}}, &data)
	if err != nil {
		return nil, fmt.Errorf("list series: %w", err)
	}
	return data, nil
}

// matrix is a query_range answer; each series' values are parsed by
// parsePoints, much cheaper than encoding/json per point.
type matrix struct {
	ResultType string `json:"resultType"`
	Result     []struct {
		Metric map[string]string `json:"metric"`
		Values json.RawMessage   `json:"values"`
	} `json:"result"`
}

func (c client) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration, m *matrix) error {
	return c.Query(ctx, "/api/v1/query_range", url.Values{"query": {expr}, "start": {unixSeconds(start)}, "end": {unixSeconds(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}, m)
}

func unixSeconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// table maps series to (node, column) and holds one chunk of values.
type table struct {
	columns []string
	nodes   []string
	nseries int
	// Per node: the ascending column indexes it has, and one chunk of
	// values, steps × len(cols), with presence flags.
	cols    [][]int
	vals    [][]float64
	present [][]bool
	// cell finds a series' place: node+"\x00"+column.
	cell map[string]cellRef
	// One row's present cells, reused.
	rowCols []int
	rowVals []float64
}

type cellRef struct{ node, pos int }

func newTable(series []map[string]string) *table {
	type key struct{ node, col string }
	seen := map[key]bool{}
	colSet := map[string]bool{}
	nodeSet := map[string]bool{}
	for _, ls := range series {
		k := key{ls[NodeLabel], ColumnName(ls)}
		if seen[k] {
			continue
		}
		seen[k] = true
		colSet[k.col] = true
		nodeSet[k.node] = true
	}
	t := &table{nseries: len(seen), cell: make(map[string]cellRef, len(seen))}
	t.columns = sortedKeys(colSet)
	t.nodes = sortedKeys(nodeSet)
	colIdx := make(map[string]int, len(t.columns))
	for i, c := range t.columns {
		colIdx[c] = i
	}
	nodeIdx := make(map[string]int, len(t.nodes))
	for i, n := range t.nodes {
		nodeIdx[n] = i
	}
	t.cols = make([][]int, len(t.nodes))
	for k := range seen {
		n := nodeIdx[k.node]
		t.cols[n] = append(t.cols[n], colIdx[k.col])
	}
	for n := range t.cols {
		sort.Ints(t.cols[n])
		for pos, ci := range t.cols[n] {
			t.cell[t.nodes[n]+"\x00"+t.columns[ci]] = cellRef{n, pos}
		}
	}
	t.vals = make([][]float64, len(t.nodes))
	t.present = make([][]bool, len(t.nodes))
	return t
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// groups returns the queries of one time chunk: the selector restricted to
// groups of nodes holding at most maxSeries series together, each wrapped
// in last_over_time over one step, so a cell holds the last sample in
// (t-step, t] and a missing sample stays missing instead of being carried
// forward by the five-minute lookback.
func (t *table) groups(matchers []*labels.Matcher, maxSeries int, step time.Duration) []string {
	var out []string
	var names []string
	n := 0
	flush := func() {
		if len(names) == 0 {
			return
		}
		parts := make([]string, 0, len(matchers)+1)
		for _, m := range matchers {
			parts = append(parts, m.String())
		}
		quoted := make([]string, len(names))
		for i, s := range names {
			quoted[i] = regexp.QuoteMeta(s)
		}
		parts = append(parts, (&labels.Matcher{Type: labels.MatchRegexp, Name: NodeLabel, Value: strings.Join(quoted, "|")}).String())
		out = append(out, "last_over_time({"+strings.Join(parts, ",")+"}["+model.Duration(step).String()+"])")
		names, n = names[:0], 0
	}
	for i, node := range t.nodes {
		if n > 0 && n+len(t.cols[i]) > maxSeries {
			flush()
		}
		names = append(names, node)
		n += len(t.cols[i])
	}
	flush()
	return out
}

// reset empties the chunk buffers for steps steps.
func (t *table) reset(steps int) {
	for n := range t.nodes {
		k := steps * len(t.cols[n])
		if cap(t.vals[n]) < k {
			t.vals[n] = make([]float64, k)
			t.present[n] = make([]bool, k)
		}
		t.vals[n] = t.vals[n][:k]
		t.present[n] = t.present[n][:k]
		clear(t.present[n])
	}
}

// fill stores a query_range answer into the chunk starting at cs. Series
// the listing did not have (created since) are skipped.
func (t *table) fill(m *matrix, cs, stepMs int64, steps int) error {
	if m.ResultType != "matrix" {
		return fmt.Errorf("result type %q, want matrix", m.ResultType)
	}
	for _, s := range m.Result {
		if s.Metric["__name__"] == "" {
			return fmt.Errorf("series %v has no metric name (the server drops it in last_over_time)", s.Metric)
		}
		ref, ok := t.cell[s.Metric[NodeLabel]+"\x00"+ColumnName(s.Metric)]
		if !ok {
			continue
		}
		width := len(t.cols[ref.node])
		err := parsePoints(s.Values, func(ms int64, v float64) error {
			off := ms - cs
			if off < 0 || off%stepMs != 0 || off/stepMs >= int64(steps) {
				return fmt.Errorf("point at %s is not one of the requested steps", time.UnixMilli(ms).UTC().Format(timeLayout))
			}
			i := int(off/stepMs)*width + ref.pos
			t.vals[ref.node][i] = v
			t.present[ref.node][i] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("series %v: %w", s.Metric, err)
		}
	}
	return nil
}

// parsePoints reads the API's points, [[1795348800.5,"1.25"],...], calling
// fn with the time in milliseconds and the value.
func parsePoints(b []byte, fn func(ms int64, v float64) error) error {
	p := pointParser{b: b}
	if !p.byte('[') {
		return p.fail("want [")
	}
	if p.byte(']') {
		return p.end()
	}
	for {
		if !p.byte('[') {
			return p.fail("want [ of a point")
		}
		num := p.until(',')
		ts, err := strconv.ParseFloat(string(num), 64)
		if err != nil || math.IsNaN(ts) || math.Abs(ts) > 9e12 {
			return p.fail(fmt.Sprintf("bad timestamp %q", num))
		}
		if !p.byte(',') || !p.byte('"') {
			return p.fail("want a quoted value")
		}
		vs := p.until('"')
		v, err := strconv.ParseFloat(string(vs), 64)
		if err != nil {
			return p.fail(fmt.Sprintf("bad value %q", vs))
		}
		if !p.byte('"') || !p.byte(']') {
			return p.fail("want ] after a point")
		}
		if err := fn(int64(math.Round(ts*1000)), v); err != nil {
			return err
		}
		if p.byte(']') {
			return p.end()
		}
		if !p.byte(',') {
			return p.fail("want , or ]")
		}
	}
}

type pointParser struct {
	b []byte
	i int
}

func (p *pointParser) skip() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\n' || p.b[p.i] == '\t' || p.b[p.i] == '\r') {
		p.i++
	}
}

// byte consumes c (after white space) if it is next.
func (p *pointParser) byte(c byte) bool {
	p.skip()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// until returns the bytes before the next c (or the end), trimmed.
func (p *pointParser) until(c byte) []byte {
	p.skip()
	j := p.i
	for j < len(p.b) && p.b[j] != c {
		j++
	}
	out := p.b[p.i:j]
	p.i = j
	for len(out) > 0 && (out[len(out)-1] == ' ' || out[len(out)-1] == '\n' || out[len(out)-1] == '\t' || out[len(out)-1] == '\r') {
		out = out[:len(out)-1]
	}
	return out
}

func (p *pointParser) end() error {
	if p.skip(); p.i != len(p.b) {
		return p.fail("trailing data")
	}
	return nil
}

func (p *pointParser) fail(msg string) error {
	return fmt.Errorf("values at byte %d: %s", p.i, msg)
}

// writeRows emits the chunk time-major, nodes in name order, skipping
// (time, node) pairs without any value.
func (t *table) writeRows(rw rowWriter, cs, stepMs int64, steps int) (int, error) {
	cols, vals := t.rowCols, t.rowVals
	defer func() { t.rowCols, t.rowVals = cols, vals }()
	rows := 0
	for s := range steps {
		ts := cs + int64(s)*stepMs
		for n, node := range t.nodes {
			width := len(t.cols[n])
			cols, vals = cols[:0], vals[:0]
			for pos := range width {
				if t.present[n][s*width+pos] {
					cols = append(cols, t.cols[n][pos])
					vals = append(vals, t.vals[n][s*width+pos])
				}
			}
			if len(cols) == 0 {
				continue
			}
			if err := rw.writeRow(ts, node, cols, vals); err != nil {
				return rows, err
			}
			rows++
		}
	}
	return rows, nil
}
