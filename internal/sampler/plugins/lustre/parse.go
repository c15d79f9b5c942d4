package lustre

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
)

// Parsers take a file's bytes and scan them in place; what a line
// resolves to is cached by its position (lines rarely move) and by name,
// so a steady-state tick allocates nothing. A line they cannot read is
// counted (malformed or unknown) and skipped: the rest of the file and
// the tick go on.

// header names the lines of the stats header that carry no counter
// (snapshot_time in all versions; start_time and elapsed_time since 2.14).
func header(name []byte) bool {
	name = bytes.TrimSuffix(name, []byte(":"))
	switch string(name) {
	case "snapshot_time", "start_time", "elapsed_time":
		return true
	}
	return false
}

// opName reports whether a counter's name may be a label value and a
// metric name part: what Lustre names its counters with.
func opName(b []byte) bool {
	if len(b) == 0 || len(b) > 64 {
		return false
	}
	for _, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// ioPrefix is "read" or "write" for the byte counters, which become
// lustre_<op>_samples_total, _minimum_size_bytes, _maximum_size_bytes and
// _bytes_total as lustre_exporter names them; "" for the others.
func ioPrefix(name []byte) string {
	switch string(name) {
	case "read_bytes":
		return "read"
	case "write_bytes":
		return "write"
	}
	return ""
}

// Help of the series.
const (
	helpSamples = "Number of %s requests counted."
	helpMin     = "Smallest %s request in bytes."
	helpMax     = "Largest %s request in bytes."
	helpBytes   = "Bytes %s."
	helpOps     = "Number of requests of this operation counted."
)

var helpVerb = map[string]string{"read": "read", "write": "written"}

// ioSeries makes the four series of a byte counter.
func ioSeries(prefix, op string, labels ...string) *series {
	return &series{n: 4, d: [4]*metric.Desc{
		metric.NewDesc(prefix+op+"_samples_total", fmt.Sprintf(helpSamples, op), metric.Counter, labels...),
		metric.NewDesc(prefix+op+"_minimum_size_bytes", fmt.Sprintf(helpMin, op), metric.Gauge, labels...),
		metric.NewDesc(prefix+op+"_maximum_size_bytes", fmt.Sprintf(helpMax, op), metric.Gauge, labels...),
		metric.NewDesc(prefix+op+"_bytes_total", fmt.Sprintf(helpBytes, helpVerb[op]), metric.Counter, labels...),
	}}
}

// cached returns the non-job series under key, made by mk on first use;
// nil beyond MaxSeries.
func (l *Lustre) cached(key string, mk func() *series) *series {
	if s := l.descs[key]; s != nil {
		return s
	}
	if len(l.descs) >= MaxSeries {
		return nil
	}
	s := mk()
	l.descs[key] = s
	return s
}

func (l *Lustre) malformedLine(s *source, line []byte) {
	l.malformed++
	l.note(logMalformed, func() error {
		return fmt.Errorf("%s: %q", s.file.Path(), trunc(line))
	})
}

func (l *Lustre) unknownField(s *source, name []byte) {
	l.unknown++
	l.note(logUnknown, func() error {
		return fmt.Errorf("%s: %q", s.file.Path(), trunc(name))
	})
}

func trunc(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// stats reads a stats or md_stats file: "name N samples [unit]" and, for
// counters with sizes or times, "min max sum" and (2.12+) "sumsq".
func (l *Lustre) stats(s *source, data []byte, b *metric.Batch) {
	i := 0
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		var f [9][]byte
		n := kernfs.Fields(line, f[:])
		if n == 0 || header(f[0]) {
			continue
		}
		if n < 3 || string(f[2]) != "samples" {
			l.unknownField(s, f[0])
			continue
		}
		count, err := kernfs.ParseUint(f[1])
		if err != nil {
			l.malformedLine(s, line)
			continue
		}
		vals := [4]float64{float64(count)}
		io := ioPrefix(f[0])
		if io != "" {
			if n < 7 {
				l.malformedLine(s, line)
				continue
			}
			ok := true
			for k := 1; k < 4; k++ {
				v, err := kernfs.ParseUint(f[3+k])
				ok = ok && err == nil
				vals[k] = float64(v)
			}
			if !ok {
				l.malformedLine(s, line)
				continue
			}
		}
		ser, hit := s.lines.Get(i, f[0])
		if !hit {
			if !opName(f[0]) {
				l.unknownField(s, f[0])
				continue
			}
			if i >= maxLines {
				continue
			}
			ser = s.byName[string(f[0])]
			if ser == nil {
				ser = l.statsSeries(s, io, string(f[0]))
				if s.byName == nil {
					s.byName = map[string]*series{}
				}
				if len(s.byName) < maxLines {
					s.byName[string(f[0])] = ser
				}
			}
			s.lines.Put(i, f[0], ser)
		}
		i++
		l.emit(ser, &vals, b)
	}
}

func (l *Lustre) statsSeries(s *source, io, op string) *series {
	comp, tgt := s.kind.Component, s.target
	if io != "" {
		return l.cached(io+"\x00"+comp+"\x00"+tgt, func() *series {
			return ioSeries("lustre_", io, "component", comp, "target", tgt)
		})
	}
	return l.cached("stats\x00"+comp+"\x00"+tgt+"\x00"+op, func() *series {
		return &series{n: 1, d: [4]*metric.Desc{metric.NewDesc("lustre_stats_total", helpOps, metric.Counter,
			"component", comp, "target", tgt, "operation", op)}}
	})
}

// rowKey is one row of an rpc_stats histogram.
type rowKey struct {
	sec    int8 // 0 pages per rpc, 1 rpcs in flight, 2 offset
	modify bool // mdc's "modify" column (rpcs in flight of modifying RPCs)
	bucket uint64
}

// maxRows bounds the rows kept per rpc_stats file (Lustre has at most 32
// per histogram).
const maxRows = 256

// rpcKnown are the rpc_stats lines without a histogram row, by first two
// fields.
var rpcKnown = [...][2]string{
	{"read", "RPCs"}, {"write", "RPCs"}, {"pending", "write"}, {"pending", "read"},
	{"modify_RPCs_in_flight:", ""}, {"read", "write"}, {"modify", ""},
}

var rpcSections = [...]string{"pages per rpc", "rpcs in flight", "offset"}

// rpcStats reads an osc or mdc rpc_stats file: per histogram (pages per
// RPC, RPCs in flight, offset) a row "N: rpcs % cum% | rpcs % cum%" (read
// and write), or "N: rpcs % cum%" under mdc's "modify" header.
func (l *Lustre) rpcStats(s *source, data []byte, b *metric.Batch) {
	sec, modify := int8(-1), false
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		var f [9][]byte
		n := kernfs.Fields(line, f[:])
		if n == 0 || header(f[0]) {
			continue
		}
		if t := kernfs.TrimSpace(line); len(t) > 0 && (t[0] < '0' || t[0] > '9') {
			found := false
			for i, h := range rpcSections {
				if bytes.HasPrefix(t, []byte(h)) {
					sec, found = int8(i), true
				}
			}
			if string(f[0]) == "modify" && n == 1 {
				modify, found = true, true
			}
			if n >= 2 && string(f[0]) == "read" && string(f[1]) == "write" {
				modify, found = false, true
			}
			for _, k := range rpcKnown {
				if string(f[0]) == k[0] && (k[1] == "" || n >= 2 && string(f[1]) == k[1]) {
					found = true
				}
			}
			if !found {
				l.unknownField(s, f[0])
			}
			continue
		}
		label := f[0]
		if len(label) < 2 || label[len(label)-1] != ':' || sec < 0 {
			l.malformedLine(s, line)
			continue
		}
		bucket, err := kernfs.ParseUint(label[:len(label)-1])
		if err != nil {
			l.malformedLine(s, line)
			continue
		}
		var vals [4]float64
		if modify {
			v, err := kernfs.ParseUint(f[1])
			if n < 4 || err != nil {
				l.malformedLine(s, line)
				continue
			}
			vals[0] = float64(v)
		} else {
			r, err1 := kernfs.ParseUint(f[1])
			w, err2 := kernfs.ParseUint(f[5])
			if n < 8 || string(f[4]) != "|" || err1 != nil || err2 != nil {
				l.malformedLine(s, line)
				continue
			}
			vals[0], vals[1] = float64(r), float64(w)
		}
		k := rowKey{sec: sec, modify: modify, bucket: bucket}
		ser := s.rows[k]
		if ser == nil {
			if s.rows == nil {
				s.rows = map[rowKey]*series{}
			}
			if len(s.rows) >= maxRows {
				continue
			}
			ser = l.rpcSeries(s, k, string(label[:len(label)-1]))
			s.rows[k] = ser
		}
		l.emit(ser, &vals, b)
	}
}

var rpcMetrics = [...]struct {
	name, help string
	typ        metric.Type
}{
	{"lustre_pages_per_rpc_total", "RPCs of this many pages (size) sent.", metric.Counter},
	{"lustre_rpcs_in_flight", "RPCs sent while this many (size) were in flight.", metric.Gauge},
	{"lustre_rpcs_offset", "RPCs at this offset in pages (size) within the object.", metric.Gauge},
}

func (l *Lustre) rpcSeries(s *source, k rowKey, size string) *series {
	m := rpcMetrics[k.sec]
	ops := []string{"read", "write"}
	if k.modify {
		ops = []string{"modify"}
	}
	out := &series{n: len(ops)}
	for i, op := range ops {
		labels := []string{"component", s.kind.Component, "target", s.target, "operation", op, "size", size}
		if k.sec == 1 {
			labels = append(labels, "type", s.kind.Dir)
		}
		key := m.name
		for _, v := range labels {
			key += "\x00" + v
		}
		one := l.cached(key, func() *series {
			return &series{n: 1, d: [4]*metric.Desc{metric.NewDesc(m.name, m.help, m.typ, labels...)}}
		})
		if one == nil {
			return nil
		}
		out.d[i] = one.d[0]
	}
	return out
}

// jobStats reads a job_stats file (YAML as Lustre prints it, scanned
// line by line: no YAML library): "- job_id: ID" opens an entry, then
// "op: { samples: N, unit: U[, min: A, max: B, sum: C[, sumsq: D]] }"
// lines. It returns the per-job series budget left.
func (l *Lustre) jobStats(s *source, data []byte, b *metric.Batch, budget int) int {
	if s.jobs == nil {
		s.jobs, s.opIndex = map[string]*job{}, map[string]int{}
	}
	s.next = s.next[:0]
	var cur *job
	inJob := false
	li, pos := 0, 0
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		t := kernfs.TrimSpace(line)
		if len(t) == 0 || string(t) == "job_stats:" {
			continue
		}
		if t[0] == '-' {
			rest := kernfs.TrimSpace(t[1:])
			id, ok := bytes.CutPrefix(rest, []byte("job_id:"))
			id = kernfs.TrimSpace(id)
			if len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' { // 2.15 quotes ids it escapes
				id = id[1 : len(id)-1]
			}
			if !ok || len(id) == 0 || len(id) > maxJobIDLen || !utf8.Valid(id) {
				l.malformedLine(s, line)
				cur, inJob = nil, false
				continue
			}
			cur, inJob = l.jobFor(s, id, pos), true
			pos++
			li = 0
			continue
		}
		c := bytes.IndexByte(t, ':')
		if c < 0 {
			l.malformedLine(s, line)
			continue
		}
		key, rest := t[:c], t[c+1:]
		for len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
		if len(rest) == 0 || rest[0] != '{' {
			if !header(key) {
				l.unknownField(s, key)
			}
			continue
		}
		if !inJob {
			l.malformedLine(s, line)
			continue
		}
		if cur == nil { // an entry beyond max_jobs: not read
			continue
		}
		idx, hit := s.ops.Get(li, key)
		if !hit {
			if !opName(key) {
				l.malformedLine(s, line)
				continue
			}
			var known bool
			if idx, known = s.opIndex[string(key)]; !known {
				if len(s.opNames) >= maxLines {
					continue
				}
				idx = len(s.opNames)
				s.opNames = append(s.opNames, string(key))
				s.opIndex[s.opNames[idx]] = idx
			}
			s.ops.Put(li, key, idx)
		}
		li++
		for len(cur.series) <= idx {
			cur.series = append(cur.series, nil)
		}
		ser := cur.series[idx]
		// A counter seen before that is only a count reads just its
		// samples (most lines; the rest of the braces is min, max, sum and
		// sumsq of latencies); new lines and byte counters get the full
		// parse, which also counts unknown fields.
		var vals [4]float64
		ok := false
		if ser != nil && ser.n == 1 {
			vals[0], ok = samplesOnly(rest)
		}
		if !ok {
			if vals, ok = l.braces(s, rest); !ok {
				l.malformedLine(s, line)
				continue
			}
		}
		need := 1
		if ser != nil {
			need = ser.n
		} else if ioPrefix(key) != "" {
			need = 4
		}
		if budget < need {
			l.cut += uint64(need)
			l.note(logCut, func() error {
				return fmt.Errorf("max_job_series = %d reached at %s", l.cfg.MaxJobSeries, s.file.Path())
			})
			continue
		}
		if ser == nil {
			ser = jobSeries(s, cur, ioPrefix(key), s.opNames[idx])
			cur.series[idx] = ser
		}
		if l.emit(ser, &vals, b) {
			budget -= need
		}
	}
	s.order, s.next = s.next, s.order
	return budget
}

// jobFor finds or makes the entry of Lustre job id at position pos; nil
// beyond max_jobs.
func (l *Lustre) jobFor(s *source, id []byte, pos int) *job {
	var j *job
	if pos < len(s.order) && s.order[pos].raw == string(id) {
		j = s.order[pos]
	} else if j = s.jobs[string(id)]; j == nil {
		if l.nJobs >= l.cfg.MaxJobs {
			l.untracked++
			l.note(logUntracked, func() error {
				return fmt.Errorf("max_jobs = %d reached at %s", l.cfg.MaxJobs, s.file.Path())
			})
			return nil
		}
		j = &job{raw: string(id), id: string(id)}
		if m, ok := l.format.Match(id); ok {
			j.id = string(m)
		}
		s.jobs[j.raw] = j
		l.nJobs++
	}
	if j.seen == l.tick { // listed twice in one file
		return j
	}
	j.seen = l.tick
	s.next = append(s.next, j)
	l.jobsNow++
	return j
}

func jobSeries(s *source, j *job, io, op string) *series {
	if io != "" {
		return ioSeries("lustre_job_", io, "component", s.kind.Component, "target", s.target, "jobid", j.id)
	}
	return &series{n: 1, d: [4]*metric.Desc{metric.NewDesc("lustre_job_stats_total", helpOps, metric.Counter,
		"component", s.kind.Component, "target", s.target, "jobid", j.id, "operation", op)}}
}

// samplesOnly reads N from "{ samples: N, …}"; ok false for anything
// else (the caller then parses the whole line).
func samplesOnly(b []byte) (float64, bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return 0, false
	}
	i := 1
	for i < len(b) && b[i] == ' ' {
		i++
	}
	const key = "samples:"
	if len(b)-i < len(key) || string(b[i:i+len(key)]) != key {
		return 0, false
	}
	for i += len(key); i < len(b) && b[i] == ' '; i++ {
	}
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	if b[j] != ',' && b[j] != ' ' && b[j] != '}' {
		return 0, false
	}
	n, err := kernfs.ParseUint(b[i:j])
	return float64(n), err == nil
}

// braces reads "{ samples: N, unit: U, min: A, max: B, sum: C, sumsq: D }"
// into samples, min, max, sum, in one pass. Keys it does not know are
// counted and skipped; a missing "}" or samples, or a bad number, is not
// ok.
func (l *Lustre) braces(s *source, b []byte) (vals [4]float64, ok bool) {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return vals, false
	}
	b = b[1 : len(b)-1]
	seen := false
	for i := 0; ; {
		for i < len(b) && (b[i] == ' ' || b[i] == ',' || b[i] == '\t') {
			i++
		}
		if i == len(b) {
			return vals, seen
		}
		j := bytes.IndexByte(b[i:], ':')
		if j < 0 {
			return vals, false
		}
		k := kernfs.TrimSpace(b[i : i+j])
		for i += j + 1; i < len(b) && b[i] == ' '; i++ {
		}
		vs := i
		for i < len(b) && b[i] != ',' && b[i] != ' ' {
			i++
		}
		v := b[vs:i]
		slot := -1
		switch string(k) {
		case "samples":
			slot = 0
			seen = true
		case "min":
			slot = 1
		case "max":
			slot = 2
		case "sum":
			slot = 3
		case "unit", "sumsq":
			continue
		default:
			l.unknownField(s, k)
			continue
		}
		n, err := kernfs.ParseUint(v)
		if err != nil {
			return vals, false
		}
		vals[slot] = float64(n)
	}
}
