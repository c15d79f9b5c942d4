package logstore

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// Query selects records. Zero fields do not filter.
type Query struct {
	From, To time.Time // message time, From inclusive, To exclusive
	Host     string    // glob (* and ?), case-insensitive
	App      string    // glob, case-insensitive
	// Severity keeps records at or above it (numerically at or below);
	// HasSeverity says it is set, since 0 (emerg) is a valid value.
	Severity    uint8
	HasSeverity bool
	Pattern     uint64   // 0: any
	Patterns    []uint64 // more ids that also match (aliases of merged patterns)
	Terms       []string // all must occur in the text, case-insensitive
}

// ParseQuery parses the search syntax: space-separated words, where
// host:GLOB, app:GLOB, severity:LEVEL (at or above) and pattern:ID filter,
// "quoted phrases" and other words are text that must all occur. A word
// whose prefix before ':' is letters only but not a known filter is an
// error, so that a typo does not turn into a search for the typo.
func ParseQuery(s string) (Query, error) {
	var q Query
	for len(s) > 0 {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return q, fmt.Errorf("unterminated quote in %s", quoteTrim(s))
			}
			if phrase := s[1 : 1+end]; phrase != "" {
				q.Terms = append(q.Terms, phrase)
			}
			s = s[2+end:]
			continue
		}
		end := strings.IndexAny(s, " \t")
		if end < 0 {
			end = len(s)
		}
		w := s[:end]
		s = s[end:]
		key, val, ok := strings.Cut(w, ":")
		if !ok || !isLetters(key) || (val == "" && !filterKeys[strings.ToLower(key)]) {
			q.Terms = append(q.Terms, w)
			continue
		}
		if strings.HasPrefix(val, "\"") {
			// key:"value with spaces"
			rest := w[len(key)+2:] + s
			e := strings.IndexByte(rest, '"')
			if e < 0 {
				return q, fmt.Errorf("unterminated quote after %s", key+":")
			}
			val, s = rest[:e], rest[e+1:]
		}
		if val == "" {
			return q, fmt.Errorf("empty value for %s", key+":")
		}
		switch strings.ToLower(key) {
		case "host":
			q.Host = val
		case "app", "tag":
			q.App = val
		case "severity", "sev", "level":
			sev, err := syslog.ParseSeverity(strings.ToLower(val))
			if err != nil {
				return q, err
			}
			q.Severity, q.HasSeverity = sev, true
		case "pattern":
			id, err := strconv.ParseUint(val, 10, 64)
			if err != nil || id == 0 {
				return q, fmt.Errorf("pattern:%s: want a pattern id (a positive number)", val)
			}
			q.Pattern = id
		default:
			return q, fmt.Errorf("unknown filter %q (known: host, app, severity, pattern; quote the word to search for it as text)", key)
		}
	}
	return q, nil
}

var filterKeys = map[string]bool{"host": true, "app": true, "tag": true, "severity": true, "sev": true, "level": true, "pattern": true}

func quoteTrim(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}

func isLetters(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// matcher is a compiled Query; it holds scratch space and is used by one
// goroutine.
type matcher struct {
	from, to       int64
	hasFrom, hasTo bool
	host, app      []byte
	sev            uint8
	hasSev         bool
	patterns       []uint64
	terms          [][]byte
	lower          []byte
}

func (q *Query) matcher() *matcher {
	m := &matcher{sev: q.Severity, hasSev: q.HasSeverity}
	if q.Pattern != 0 || len(q.Patterns) > 0 {
		m.patterns = append([]uint64{q.Pattern}, q.Patterns...)
	}
	if !q.From.IsZero() {
		m.from, m.hasFrom = q.From.UnixNano(), true
	}
	if !q.To.IsZero() {
		m.to, m.hasTo = q.To.UnixNano(), true
	}
	if q.Host != "" {
		m.host = []byte(strings.ToLower(q.Host))
	}
	if q.App != "" {
		m.app = []byte(strings.ToLower(q.App))
	}
	for _, t := range q.Terms {
		m.terms = append(m.terms, []byte(strings.ToLower(t)))
	}
	return m
}

// timeOverlaps reports whether [lo, hi] of message times can hold a match.
func (m *matcher) timeOverlaps(lo, hi int64) bool {
	return (!m.hasFrom || hi >= m.from) && (!m.hasTo || lo < m.to)
}

func (m *matcher) match(v *view) bool {
	if (m.hasFrom && v.time < m.from) || (m.hasTo && v.time >= m.to) {
		return false
	}
	if m.hasSev && v.sev > m.sev {
		return false
	}
	if m.patterns != nil && !slices.Contains(m.patterns, v.pattern) {
		return false
	}
	if m.host != nil && !globFold(m.host, v.host) {
		return false
	}
	if m.app != nil && !globFold(m.app, v.app) {
		return false
	}
	if len(m.terms) > 0 {
		m.lower = appendLower(m.lower[:0], v.text)
		for _, t := range m.terms {
			if !bytes.Contains(m.lower, t) {
				return false
			}
		}
	}
	return true
}

func appendLower(dst, s []byte) []byte {
	for _, c := range s {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// globFold matches s against a lower-case pattern with * (any run) and ?
// (one byte), ignoring ASCII case. Iterative with one backtrack point, so
// linear in practice and never exponential.
func globFold(pat, s []byte) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pat) && (pat[p] == '?' || pat[p] == lowerByte(s[i])):
			p++
			i++
		case p < len(pat) && pat[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}
