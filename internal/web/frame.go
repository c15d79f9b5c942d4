package web

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"
)

// Quantised cell codes. A frame carries one byte per node of the last node
// list, so a 1 Hz stream costs about 4/3 bytes per node per second after
// base64. Down and missing get their own codes so the heatmap can draw them
// differently from the low end of the scale.
const (
	// QuantMax is the code of the largest value; codes 0..QuantMax map
	// linearly onto [min, max] of the frame.
	QuantMax = 253
	// QuantDown marks a node whose up is 0.
	QuantDown = 254
	// QuantMissing marks a node without a finite value for the expression.
	QuantMissing = 255
)

// Quantise writes one code per node into q (which must have len(nodes)) and
// returns the range the codes are relative to. When no node has a value the
// range is 0, 0.
func Quantise(q []byte, nodes []NodeInfo, vals map[string]float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, n := range nodes {
		v, ok := vals[n.Name]
		if !ok || !n.Up || math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		lo = min(lo, v)
		hi = max(hi, v)
	}
	if lo > hi {
		lo, hi = 0, 0
	}
	span := hi - lo
	for i, n := range nodes {
		v, ok := vals[n.Name]
		switch {
		case !n.Up:
			q[i] = QuantDown
		case !ok || math.IsNaN(v) || math.IsInf(v, 0):
			q[i] = QuantMissing
		case span == 0 || math.IsInf(span, 0):
			// One distinct value (or a range too wide for float64): the
			// legend shows it; cells sit at the low end.
			q[i] = 0
		default:
			q[i] = byte(min(QuantMax, max(0, math.Round((v-lo)/span*QuantMax))))
		}
	}
	return lo, hi
}

// Dequantise returns the value a code stands for, NaN for down and missing.
// The error is at most (hi-lo)/(2*QuantMax).
func Dequantise(c byte, lo, hi float64) float64 {
	if c > QuantMax {
		return math.NaN()
	}
	return lo + float64(c)/QuantMax*(hi-lo)
}

// AppendFrameEvent appends one SSE "frame" event:
//
//	event: frame
//	data: {"t":<unix ms>,"min":<lo>,"max":<hi>,"q":"<base64 of q>"}
//
// followed by a blank line. lo and hi must be finite.
func AppendFrameEvent(dst []byte, t time.Time, lo, hi float64, q []byte) []byte {
	dst = append(dst, "event: frame\ndata: {\"t\":"...)
	dst = strconv.AppendInt(dst, t.UnixMilli(), 10)
	dst = append(dst, `,"min":`...)
	dst = strconv.AppendFloat(dst, lo, 'g', -1, 64)
	dst = append(dst, `,"max":`...)
	dst = strconv.AppendFloat(dst, hi, 'g', -1, 64)
	dst = append(dst, `,"q":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, q)
	return append(dst, "\"}\n\n"...)
}

// appendJSONEvent appends an SSE event whose data is v as JSON. JSON never
// contains a raw newline, so one data line suffices.
func appendJSONEvent(dst []byte, event string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"internal: cannot encode event"}`)
	}
	dst = append(dst, "event: "...)
	dst = append(dst, event...)
	dst = append(dst, "\ndata: "...)
	dst = append(dst, b...)
	return append(dst, "\n\n"...)
}

// sortNodes orders nodes naturally by name (cn2 before cn10), so frames and
// the heatmap layout are stable whatever order the Source returns.
func sortNodes(nodes []NodeInfo) {
	slices.SortFunc(nodes, func(a, b NodeInfo) int { return naturalCompare(a.Name, b.Name) })
}

// naturalCompare compares strings treating runs of digits as numbers.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, ra := digitRun(a)
			nb, rb := digitRun(b)
			// Compare numerically without parsing (runs may be long): strip
			// leading zeros, then longer is bigger, then lexical.
			ta, tb := trimZeros(na), trimZeros(nb)
			if c := cmp.Compare(len(ta), len(tb)); c != 0 {
				return c
			}
			if c := cmp.Compare(ta, tb); c != 0 {
				return c
			}
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) (run, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
