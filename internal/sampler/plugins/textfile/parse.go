package textfile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Kind is a metric family's type as declared by a TYPE line.
type Kind uint8

const (
	KindUntyped Kind = iota
	KindCounter
	KindGauge
	KindSummary
	KindHistogram
)

var kindNames = map[string]Kind{"untyped": KindUntyped, "counter": KindCounter, "gauge": KindGauge, "summary": KindSummary, "histogram": KindHistogram}

// Point is one quantile or bucket: its bound and value.
type Point struct{ Bound, Value float64 }

// Metric is one labelled member of a family. Labels are sorted by name and
// exclude "quantile" (summaries) and "le" (histograms).
type Metric struct {
	Labels     []metric.Label
	Value      float64 // counter, gauge, untyped
	Count, Sum float64 // summary, histogram
	Points     []Point // quantiles or buckets, in file order
}

// Family is one metric family of a text file.
type Family struct {
	Name    string
	Help    string
	HasHelp bool
	Kind    Kind
	typed   bool // a TYPE line was seen
	Metrics []*Metric
	bySig   map[string]*Metric // summaries and histograms: members by label set
}

// Limits bound what one file may hold.
type Limits struct {
	MaxSamples int // sample lines
	MaxLabels  int // label pairs on one sample line
}

// ErrFormat is wrapped by every parse error.
var ErrFormat = errors.New("invalid text format")

// ErrTimestamp is returned for a file whose samples carry timestamps, which
// node_exporter refuses (the whole file is skipped).
var ErrTimestamp = errors.New("contains unsupported client-side timestamps")

// Parse reads Prometheus text exposition format (0.0.4) with the rules of
// node_exporter's parser (prometheus/common expfmt): HELP and TYPE at most
// once per family and TYPE before its samples; _bucket, _count and _sum
// samples join a histogram or summary family declared under the base name;
// legacy metric and label names; label values with \\, \" and \n escapes;
// values as Go floats (no hex exponents or underscores). Families without
// samples are dropped. Errors name the line.
func Parse(data []byte, lim Limits) ([]*Family, error) {
	p := parser{lim: lim, byName: map[string]*Family{}, names: map[string]string{}}
	for n := 1; len(data) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if err := p.line(line); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
	}
	out := p.families[:0]
	for _, f := range p.families {
		if len(f.Metrics) > 0 {
			f.bySig = nil
			out = append(out, f)
		}
	}
	if p.stamped {
		return out, ErrTimestamp
	}
	return out, nil
}

type parser struct {
	lim      Limits
	byName   map[string]*Family
	families []*Family
	samples  int
	stamped  bool
	labels   []metric.Label // scratch
	names    map[string]string
}

func errf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrFormat)...)
}

func skipBlank(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func isNameStart(c byte, colon bool) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || colon && c == ':'
}

func isNameChar(c byte, colon bool) bool { return isNameStart(c, colon) || c >= '0' && c <= '9' }

// name cuts a metric name (colon true) or label name from the start of
// b; names repeat on every line, so they are interned.
func (p *parser) name(b []byte, colon bool) (string, []byte) {
	if len(b) == 0 || !isNameStart(b[0], colon) {
		return "", b
	}
	i := 1
	for i < len(b) && isNameChar(b[i], colon) {
		i++
	}
	n, ok := p.names[string(b[:i])]
	if !ok {
		n = string(b[:i])
		p.names[n] = n
	}
	return n, b[i:]
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func (p *parser) line(line []byte) error {
	line = skipBlank(line)
	if len(line) > 0 && line[len(line)-1] == '\r' {
		// expfmt fails on a CRLF file too (in the value or the name)
		return errf("carriage return at end of line (CRLF file?)")
	}
	if len(line) == 0 {
		return nil
	}
	if line[0] == '#' {
		return p.comment(skipBlank(line[1:]))
	}
	return p.sample(line)
}

func (p *parser) family(name string) *Family {
	f := p.byName[name]
	if f == nil {
		f = &Family{Name: name}
		p.byName[name] = f
		p.families = append(p.families, f)
	}
	return f
}

func (p *parser) comment(b []byte) error {
	var kw []byte
	i := 0
	for i < len(b) && b[i] != ' ' && b[i] != '\t' {
		i++
	}
	kw, b = b[:i], b[i:]
	isHelp, isType := string(kw) == "HELP", string(kw) == "TYPE"
	if !isHelp && !isType {
		return nil // an ordinary comment
	}
	b = skipBlank(b)
	mname, rest := p.name(b, true)
	if mname == "" {
		return errf("%s without a valid metric name: %q", kw, clip(b))
	}
	if len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' {
		return errf("invalid metric name in %s line: %q", kw, clip(b))
	}
	rest = skipBlank(rest)
	f := p.family(mname)
	if isHelp {
		if f.HasHelp {
			return errf("second HELP line for metric name %q", mname)
		}
		help, err := unescape(rest, false)
		if err != nil {
			return err
		}
		f.Help, f.HasHelp = help, true
		return nil
	}
	if f.typed || len(f.Metrics) > 0 {
		return errf("second TYPE line for metric name %q, or TYPE reported after samples", mname)
	}
	t := bytes.TrimRight(rest, " \t")
	k, ok := kindNames[strings.ToLower(string(t))]
	if !ok {
		return errf("unknown metric type %q", clip(t))
	}
	f.Kind, f.typed = k, true
	return nil
}

// unescape decodes a HELP text (\\ and \n) or a label value (also \").
func unescape(b []byte, quote bool) (string, error) {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b), nil
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i == len(b) {
			return "", errf("escape at end of text")
		}
		switch b[i] {
		case '\\':
			out = append(out, '\\')
		case 'n':
			out = append(out, '\n')
		case '"':
			if !quote {
				return "", errf("invalid escape sequence '\\\"' in help text")
			}
			out = append(out, '"')
		default:
			return "", errf("invalid escape sequence '\\%c'", b[i])
		}
	}
	return string(out), nil
}

// labelValue cuts a quoted label value (b starts after the opening quote).
func labelValue(b []byte) (string, []byte, error) {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			v, err := unescape(b[:i], true)
			if err != nil {
				return "", nil, err
			}
			if !utf8.ValidString(v) {
				return "", nil, errf("invalid label value %q: not UTF-8", v)
			}
			return v, b[i+1:], nil
		}
	}
	return "", nil, errf("unterminated label value")
}

// parseFloat reads a value as expfmt does: strconv.ParseFloat without the
// hex-float exponent or digit separators it would otherwise accept.
func parseFloat(b []byte) (float64, error) {
	if bytes.ContainsAny(b, "pP_") {
		return 0, errf("unsupported character in float %q", clip(b))
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, errf("expected float as value, got %q", clip(b))
	}
	return v, nil
}

func (p *parser) sample(b []byte) error {
	mname, rest := p.name(b, true)
	if mname == "" {
		return errf("invalid metric name %q", clip(b))
	}
	if p.samples++; p.lim.MaxSamples > 0 && p.samples > p.lim.MaxSamples {
		return fmt.Errorf("more than %d samples", p.lim.MaxSamples)
	}
	if len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '{' {
		return errf("invalid metric name %q", clip(b))
	}
	rest = skipBlank(rest)
	labels := p.labels[:0]
	if len(rest) > 0 && rest[0] == '{' {
		rest = skipBlank(rest[1:])
		for len(rest) > 0 && rest[0] != '}' {
			lname, r := p.name(rest, false)
			if lname == "" {
				return errf("invalid label name in %q", clip(rest))
			}
			if lname == "__name__" {
				return errf("label name %q is reserved", lname)
			}
			r = skipBlank(r)
			if len(r) == 0 || r[0] != '=' {
				return errf("expected '=' after label name %q", lname)
			}
			r = skipBlank(r[1:])
			if len(r) == 0 || r[0] != '"' {
				return errf("expected '\"' to start the value of label %q", lname)
			}
			val, r, err := labelValue(r[1:])
			if err != nil {
				return err
			}
			for _, l := range labels {
				if l.Name == lname {
					return errf("duplicate label name %q", lname)
				}
			}
			if p.lim.MaxLabels > 0 && len(labels) >= p.lim.MaxLabels {
				return fmt.Errorf("more than %d labels on %s", p.lim.MaxLabels, mname)
			}
			labels = append(labels, metric.Label{Name: lname, Value: val})
			r = skipBlank(r)
			if len(r) > 0 && r[0] == ',' {
				r = skipBlank(r[1:])
			} else if len(r) == 0 || r[0] != '}' {
				return errf("expected ',' or '}' after the value of label %q", lname)
			}
			rest = r
		}
		if len(rest) == 0 {
			return errf("unterminated label set of %s", mname)
		}
		rest = skipBlank(rest[1:])
	}
	p.labels = labels
	vtok, rest := cutToken(rest)
	if len(vtok) == 0 {
		return errf("no value for %s", mname)
	}
	v, err := parseFloat(vtok)
	if err != nil {
		return err
	}
	if ts, rest2 := cutToken(skipBlank(rest)); len(ts) > 0 {
		if _, err := strconv.ParseInt(string(ts), 10, 64); err != nil {
			return errf("expected integer as timestamp, got %q", clip(ts))
		}
		if len(skipBlank(rest2)) > 0 {
			return errf("spurious text after the timestamp: %q", clip(rest2))
		}
		p.stamped = true
	}
	return p.add(mname, labels, v)
}

func cutToken(b []byte) (tok, rest []byte) {
	b = skipBlank(b)
	i := 0
	for i < len(b) && b[i] != ' ' && b[i] != '\t' {
		i++
	}
	return b[:i], b[i:]
}

// add files one sample under its family.
func (p *parser) add(mname string, labels []metric.Label, v float64) error {
	f, suffix := p.familyOf(mname)
	switch f.Kind {
	case KindSummary, KindHistogram:
		var bound float64
		special := "quantile"
		if f.Kind == KindHistogram {
			special = "le"
		}
		hasBound := false
		rest := make([]metric.Label, 0, len(labels))
		for _, l := range labels {
			if l.Name == special && (suffix == "" || suffix == "_bucket") {
				b, err := parseFloat([]byte(l.Value))
				if err != nil {
					return errf("expected float as value for %q label, got %q", special, l.Value)
				}
				bound, hasBound = b, true
				continue
			}
			rest = append(rest, l)
		}
		sortLabels(rest)
		m := f.member(rest)
		switch suffix {
		case "_sum":
			m.Sum = v
		case "_count":
			c, err := count(v)
			if err != nil {
				return err
			}
			m.Count = c
		default:
			if !hasBound {
				return errf("%s sample without a %q label", mname, special)
			}
			if f.Kind == KindHistogram {
				c, err := count(v)
				if err != nil {
					return err
				}
				v = c
			}
			m.Points = append(m.Points, Point{bound, v})
		}
		return nil
	}
	m := &Metric{Labels: slices.Clone(labels), Value: v}
	sortLabels(m.Labels)
	f.Metrics = append(f.Metrics, m)
	return nil
}

// count converts a count as expfmt does (to an unsigned integer).
func count(v float64) (float64, error) {
	if math.IsNaN(v) || v < 0 || v >= 1<<64 {
		return 0, errf("invalid count %v", v)
	}
	return float64(uint64(v)), nil
}

func sortLabels(l []metric.Label) {
	slices.SortFunc(l, func(a, b metric.Label) int { return strings.Compare(a.Name, b.Name) })
}

// familyOf finds the family of a sample name: a declared histogram or
// summary under the name without _bucket/_count/_sum, or else the family of
// the name itself.
func (p *parser) familyOf(mname string) (*Family, string) {
	for _, suf := range [...]string{"_bucket", "_count", "_sum"} {
		base, ok := strings.CutSuffix(mname, suf)
		if !ok {
			continue
		}
		if f := p.byName[base]; f != nil && (f.Kind == KindHistogram || f.Kind == KindSummary && suf != "_bucket") {
			return f, suf
		}
	}
	return p.family(mname), ""
}

// member returns the summary or histogram member with these labels.
func (f *Family) member(labels []metric.Label) *Metric {
	var sig strings.Builder
	for _, l := range labels {
		sig.WriteString(l.Name)
		sig.WriteByte(0)
		sig.WriteString(l.Value)
		sig.WriteByte(0)
	}
	if f.bySig == nil {
		f.bySig = map[string]*Metric{}
	}
	if m := f.bySig[sig.String()]; m != nil {
		return m
	}
	m := &Metric{Labels: labels}
	f.bySig[sig.String()] = m
	f.Metrics = append(f.Metrics, m)
	return m
}
