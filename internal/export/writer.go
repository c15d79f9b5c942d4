package export

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

// Formats of the export.
const (
	CSV     = "csv"
	Parquet = "parquet"
)

// rowWriter takes rows in order. cols are the ascending indexes of the
// row's present cells and vals their values; both are only valid during
// the call.
type rowWriter interface {
	writeRow(t int64, node string, cols []int, vals []float64) error
	// finish flushes buffered rows and the format's footer; the caller
	// closes the file.
	finish() error
}

func newRowWriter(format string, w io.Writer, columns []string, meta map[string]string, cellBudget int) (rowWriter, error) {
	switch format {
	case CSV:
		return newCSVWriter(w, columns)
	case Parquet:
		return newParquetWriter(w, columns, meta, cellBudget), nil
	}
	return nil, fmt.Errorf("unknown format %q: want %s or %s", format, CSV, Parquet)
}

// timeLayout is RFC 3339 in UTC with milliseconds, the store's resolution.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// csvWriter writes RFC 4180 CSV: a header `time,node,COLUMN...`, then one
// line per row; a missing cell is empty, NaN and infinities are written
// as NaN, inf and -inf, which pandas, polars and DuckDB all read as floats.
type csvWriter struct {
	w     *bufio.Writer
	ncols int
	line  []byte
}

func newCSVWriter(w io.Writer, columns []string) (*csvWriter, error) {
	c := &csvWriter{w: bufio.NewWriterSize(w, 256<<10), ncols: len(columns)}
	b := append(c.line[:0], "time,node"...)
	for _, col := range columns {
		b = append(b, ',')
		b = appendCSVField(b, col)
	}
	b = append(b, '\n')
	c.line = b
	_, err := c.w.Write(b)
	return c, err
}

func (c *csvWriter) writeRow(t int64, node string, cols []int, vals []float64) error {
	b := time.UnixMilli(t).UTC().AppendFormat(c.line[:0], timeLayout)
	b = append(b, ',')
	b = appendCSVField(b, node)
	next := 0
	for i, ci := range cols {
		for ; next <= ci; next++ {
			b = append(b, ',')
		}
		b = appendCSVFloat(b, vals[i])
	}
	for ; next < c.ncols; next++ {
		b = append(b, ',')
	}
	b = append(b, '\n')
	c.line = b
	_, err := c.w.Write(b)
	return err
}

func (c *csvWriter) finish() error { return c.w.Flush() }

// appendCSVField quotes s when RFC 4180 requires it (column names carry
// commas and quotes: `m{a="1",b="2"}`).
func appendCSVField(b []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") && (s == "" || (s[0] != ' ' && s[0] != '\t')) {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

func appendCSVFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "inf"...)
	case math.IsInf(v, -1):
		return append(b, "-inf"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// parquetWriter writes one row group per rowsPerGroup rows with columns
// time (TIMESTAMP(MILLIS, UTC), required), node (UTF-8, required) and one
// optional DOUBLE per series column, in that order; a missing cell is null.
type parquetWriter struct {
	//lint:ignore SA1019 the row-based Writer is the one API that takes a schema built at run time
	w       *parquet.Writer
	ncols   int
	pending []parquet.Row
	row     int // rows used in pending
}

// orderedGroup is a parquet group whose fields keep the order given:
// parquet.Group sorts them by name, which would put the metric columns
// before time and node.
type orderedGroup struct {
	parquet.Group
	fields []parquet.Field
}

func (g orderedGroup) Fields() []parquet.Field { return g.fields }

func newParquetWriter(w io.Writer, columns []string, meta map[string]string, cellBudget int) *parquetWriter {
	fields := make([]parquet.Field, 0, len(columns)+2)
	group := parquet.Group{}
	add := func(name string, n parquet.Node) {
		group[name] = n
		fields = append(fields, parquet.Group{name: n}.Fields()[0])
	}
	add("time", parquet.Timestamp(parquet.Millisecond))
	add("node", parquet.String())
	for _, c := range columns {
		add(c, parquet.Optional(parquet.Leaf(parquet.DoubleType)))
	}
	schema := parquet.NewSchema("vigil_export", orderedGroup{Group: group, fields: fields})
	ncols := len(columns) + 2
	opts := []parquet.WriterOption{
		schema,
		parquet.Compression(&snappy.Codec{}),
		// Page buffers are per column: keep their sum bounded when there
		// are thousands of columns.
		parquet.PageBufferSize(min(max((64<<20)/ncols, 16<<10), 256<<10)),
		parquet.MaxRowsPerRowGroup(int64(max(cellBudget/ncols, 1024))),
		parquet.CreatedBy("vigil", "export", ""),
	}
	for k, v := range meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	pw := &parquetWriter{w: parquet.NewWriter(w, opts...), ncols: len(columns)}
	pw.pending = make([]parquet.Row, 256)
	for i := range pw.pending {
		pw.pending[i] = make(parquet.Row, ncols)
	}
	return pw
}

func (p *parquetWriter) writeRow(t int64, node string, cols []int, vals []float64) error {
	r := p.pending[p.row]
	r[0] = parquet.Int64Value(t).Level(0, 0, 0)
	r[1] = parquet.ByteArrayValue([]byte(node)).Level(0, 0, 1)
	next := 0
	for i, ci := range cols {
		for ; next < ci; next++ {
			r[next+2] = parquet.Value{}.Level(0, 0, next+2)
		}
		r[ci+2] = parquet.DoubleValue(vals[i]).Level(0, 1, ci+2)
		next = ci + 1
	}
	for ; next < p.ncols; next++ {
		r[next+2] = parquet.Value{}.Level(0, 0, next+2)
	}
	p.row++
	if p.row == len(p.pending) {
		return p.flushRows()
	}
	return nil
}

func (p *parquetWriter) flushRows() error {
	n, err := p.w.WriteRows(p.pending[:p.row])
	if err == nil && n != p.row {
		err = fmt.Errorf("parquet: wrote %d of %d rows", n, p.row)
	}
	p.row = 0
	return err
}

func (p *parquetWriter) finish() error {
	if err := p.flushRows(); err != nil {
		return err
	}
	return p.w.Close()
}
