package query

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// The encoders below append the Prometheus API's JSON by hand: results of
// range queries over thousands of series are the bulk of what the server
// writes, and reflection-based encoding of them costs several times more.

func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, `\u00`...)
			b = append(b, hex[c>>4], hex[c&0xf])
		}
		i++
	}
	return append(b, '"')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, l.Name)
		b = append(b, ':')
		b = appendString(b, l.Value)
	})
	return append(b, '}')
}

// appendTimestamp writes milliseconds as seconds with up to three decimals.
func appendTimestamp(b []byte, ms int64) []byte {
	if ms < 0 {
		b = append(b, '-')
		ms = -ms
	}
	b = strconv.AppendInt(b, ms/1000, 10)
	if f := ms % 1000; f != 0 {
		b = append(b, '.')
		if f < 100 {
			b = append(b, '0')
		}
		if f < 10 {
			b = append(b, '0')
		}
		for f%10 == 0 {
			f /= 10
		}
		b = strconv.AppendInt(b, f, 10)
	}
	return b
}

// appendValue writes a sample value as the API does: a JSON string.
func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(b, `"-Inf"`...)
	}
	b = append(b, '"')
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	return append(b, '"')
}

func appendPoint(b []byte, t int64, v float64) []byte {
	b = append(b, '[')
	b = appendTimestamp(b, t)
	b = append(b, ',')
	b = appendValue(b, v)
	return append(b, ']')
}

// flushSize is how much of a result is encoded before it is written out,
// so a large result is never held twice, as values and as JSON.
const flushSize = 256 << 10

// appendResult writes {"resultType":...,"result":...}. Native histograms
// are not stored by Vigil, so samples carrying one are written with their
// sum only. flush, if not nil, is given b whenever it exceeds flushSize
// and returns the buffer to go on with.
func appendResult(b []byte, v parser.Value, flush func([]byte) []byte) []byte {
	if flush == nil {
		flush = func(b []byte) []byte { return b }
	}
	b = append(b, `{"resultType":`...)
	b = appendString(b, string(v.Type()))
	b = append(b, `,"result":`...)
	switch r := v.(type) {
	case promql.Scalar:
		b = appendPoint(b, r.T, r.V)
	case promql.String:
		b = append(b, '[')
		b = appendTimestamp(b, r.T)
		b = append(b, ',')
		b = appendString(b, r.V)
		b = append(b, ']')
	case promql.Vector:
		b = append(b, '[')
		for i, s := range r {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, s.Metric)
			b = append(b, `,"value":`...)
			f := s.F
			if s.H != nil {
				f = s.H.Sum
			}
			b = appendPoint(b, s.T, f)
			b = append(b, '}')
			if len(b) > flushSize {
				b = flush(b)
			}
		}
		b = append(b, ']')
	case promql.Matrix:
		b = append(b, '[')
		for i, s := range r {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, s.Metric)
			b = append(b, `,"values":[`...)
			for j, p := range s.Floats {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendPoint(b, p.T, p.F)
				if len(b) > flushSize {
					b = flush(b)
				}
			}
			for j, p := range s.Histograms {
				if j > 0 || len(s.Floats) > 0 {
					b = append(b, ',')
				}
				b = appendPoint(b, p.T, p.H.Sum)
			}
			b = append(b, "]}"...)
		}
		b = append(b, ']')
	default:
		b = append(b, "null"...)
	}
	return append(b, '}')
}
