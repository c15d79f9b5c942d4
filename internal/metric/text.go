package metric

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// TextWriter renders batches in the Prometheus text exposition format
// (version 0.0.4), grouping samples of one metric family under one HELP and
// TYPE header and sorting families by name, as node_exporter does. It keeps
// its buffers between calls; it is not safe for concurrent use.
type TextWriter struct {
	// ConstLabels are written first on every series (e.g. node="cn01").
	ConstLabels []Label
	// Timestamps appends each sample's batch time in milliseconds, as in
	// recordings (`vigil record`) and federation; /metrics has none.
	Timestamps bool
	buf        []byte
	order      []int
	descs      []*Desc
	values     []float64
	times      []int64
}

// Write renders the samples of all batches to w.
func (tw *TextWriter) Write(w io.Writer, batches ...*Batch) error {
	tw.descs, tw.values, tw.times = tw.descs[:0], tw.values[:0], tw.times[:0]
	for _, b := range batches {
		if b != nil {
			tw.descs = append(tw.descs, b.Descs...)
			tw.values = append(tw.values, b.Values...)
			if tw.Timestamps {
				for range b.Descs {
					tw.times = append(tw.times, b.Time.UnixMilli())
				}
			}
		}
	}
	tw.order = tw.order[:0]
	for i := range tw.descs {
		tw.order = append(tw.order, i)
	}
	s := tw.descs
	slices.SortStableFunc(tw.order, func(a, b int) int {
		if c := strings.Compare(s[a].Name, s[b].Name); c != 0 {
			return c
		}
		return compareLabels(s[a].Labels, s[b].Labels)
	})
	buf := tw.buf[:0]
	prev := ""
	for _, i := range tw.order {
		d := s[i]
		if d.Name != prev {
			prev = d.Name
			buf = append(buf, "# HELP "...)
			buf = append(buf, d.Name...)
			buf = append(buf, ' ')
			buf = appendEscaped(buf, d.Help, false)
			buf = append(buf, "\n# TYPE "...)
			buf = append(buf, d.Name...)
			buf = append(buf, ' ')
			buf = append(buf, d.Type.String()...)
			buf = append(buf, '\n')
		}
		buf = AppendSeries(buf, d, tw.ConstLabels)
		buf = append(buf, ' ')
		buf = AppendFloat(buf, tw.values[i])
		if tw.Timestamps {
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, tw.times[i], 10)
		}
		buf = append(buf, '\n')
	}
	tw.buf = buf
	_, err := w.Write(buf)
	return err
}

// AppendSeries appends name{labels} with const labels first, except those
// d has a label of the same name for.
func AppendSeries(buf []byte, d *Desc, constLabels []Label) []byte {
	buf = append(buf, d.Name...)
	if len(constLabels)+len(d.Labels) == 0 {
		return buf
	}
	buf = append(buf, '{')
	n := 0
	for k, ls := range [2][]Label{constLabels, d.Labels} {
		for _, l := range ls {
			if k == 0 && d.hasLabel(l.Name) {
				continue // the series' own label wins (NUMA node="0")
			}
			if n > 0 {
				buf = append(buf, ',')
			}
			n++
			buf = append(buf, l.Name...)
			buf = append(buf, `="`...)
			buf = appendEscaped(buf, l.Value, true)
			buf = append(buf, '"')
		}
	}
	return append(buf, '}')
}

// AppendFloat formats v as the Prometheus client libraries do.
func AppendFloat(buf []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(buf, "NaN"...)
	case math.IsInf(v, 1):
		return append(buf, "+Inf"...)
	case math.IsInf(v, -1):
		return append(buf, "-Inf"...)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}

func appendEscaped(buf []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			buf = append(buf, `\\`...)
		case c == '\n':
			buf = append(buf, `\n`...)
		case c == '"' && quote:
			buf = append(buf, `\"`...)
		default:
			buf = append(buf, c)
		}
	}
	return buf
}

func compareLabels(a, b []Label) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i].Name, b[i].Name); c != 0 {
			return c
		}
		if c := compareLabelValue(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// compareLabelValue orders numeric values numerically (cpu="2" before
// cpu="10"), the rest lexically.
func compareLabelValue(a, b string) int {
	if isDigits(a) && isDigits(b) && len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

func isDigits(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
