package pattern

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The saved state is line-oriented text, so it can be inspected and diffed:
//
//	vigil-patterns 1
//	next <next id>
//	p <id> <count> <first unix ns> <last unix ns> <weight>
//	t <quoted token> <quoted token> ...
//	e <quoted example>        (zero or more)
//	a <alias id> ...          (optional)
//
// weight is the number of signatures that joined the pattern, which the
// merge rules count as variants. Patterns are written most recently used
// first. Strings are Go-quoted, so
// any bytes survive. Signatures are not saved: they are a cache, rebuilt as
// messages arrive, and a message whose words fit a loaded template joins it
// and gets its old id.
//
// The masking rules may change between versions while the format stays:
// a data directory of an older Vigil loads as it is, its messages keep
// their ids wherever the new masking still fits the old template (most do,
// old templates being coarser), and messages now split differently (a
// fixed unit after a number, "jk2_init()" no longer a value) start new
// patterns while the old ones age out by the LRU bound.
const (
	saveMagic   = "vigil-patterns"
	saveVersion = 1
)

// ErrFormat is wrapped by Load errors about malformed input.
var ErrFormat = errors.New("malformed pattern state")

// Save writes the miner's patterns and aliases to w.
func (m *Miner) Save(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s %d\nnext %d\n", saveMagic, saveVersion, m.nextID)
	var line []byte
	for p := m.patHead; p != nil; p = p.next {
		line = fmt.Appendf(line[:0], "p %d %d %d %d %d\nt", p.id, p.count, p.first, p.last, p.weight)
		for _, t := range p.toks {
			line = append(line, ' ')
			line = strconv.AppendQuote(line, t)
		}
		line = append(line, '\n')
		for _, e := range p.examples {
			line = append(line, "e "...)
			line = strconv.AppendQuote(line, e)
			line = append(line, '\n')
		}
		if len(p.aliases) > 0 {
			line = append(line, 'a')
			for _, a := range p.aliases {
				line = append(line, ' ')
				line = strconv.AppendUint(line, a, 10)
			}
			line = append(line, '\n')
		}
		bw.Write(line)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("save patterns: %w", err)
	}
	return nil
}

// Load reads state written by Save into m, which must be empty. Patterns
// beyond Config.MaxPatterns are dropped, least recently used first. On
// error m is left empty.
func (m *Miner) Load(r io.Reader) error {
	if len(m.pats) != 0 || m.nsigs != 0 {
		return errors.New("load patterns: miner is not empty")
	}
	loaded, next, err := m.parseState(r)
	if err != nil {
		return fmt.Errorf("load patterns: %w", err)
	}
	// Oldest first, so that the LRU order is restored and the bound
	// evicts the least recently used.
	for i := len(loaded) - 1; i >= 0; i-- {
		p := loaded[i]
		for len(m.pats) >= m.cfg.MaxPatterns && m.patTail != nil {
			m.evict(m.patTail)
		}
		m.pats[p.id] = p
		m.byLen[len(p.toks)] = append(m.byLen[len(p.toks)], p)
		m.pushPat(p)
		for _, a := range p.aliases {
			m.alias[a] = p.id
		}
	}
	m.nextID = next
	return nil
}

func (m *Miner) parseState(r io.Reader) ([]*pattern, uint64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	lineNo := 0
	nextLine := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		lineNo++
		return sc.Text(), true
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("line %d: %s: %w", lineNo, fmt.Sprintf(format, args...), ErrFormat)
	}
	l, ok := nextLine()
	if !ok {
		if err := sc.Err(); err != nil {
			return nil, 0, err
		}
		return nil, 0, bad("empty input")
	}
	magic, ver, _ := strings.Cut(l, " ")
	if magic != saveMagic {
		return nil, 0, bad("not a pattern state file")
	}
	if ver != strconv.Itoa(saveVersion) {
		return nil, 0, bad("unsupported version %q", ver)
	}
	l, _ = nextLine()
	f := strings.Fields(l)
	if len(f) != 2 || f[0] != "next" {
		return nil, 0, bad("want next id")
	}
	next, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil || next == 0 {
		return nil, 0, bad("bad next id %q", f[1])
	}
	var out []*pattern
	seen := make(map[uint64]bool)
	var cur *pattern
	for {
		l, ok := nextLine()
		if !ok {
			break
		}
		kind, rest, _ := strings.Cut(l, " ")
		switch kind {
		case "p":
			f := strings.Fields(rest)
			if len(f) != 5 {
				return nil, 0, bad("pattern wants 5 fields, got %d", len(f))
			}
			var v [5]uint64
			for i := range f {
				n, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil || ((i < 2 || i == 4) && n < 0) || (i == 4 && n > 1<<31) {
					return nil, 0, bad("bad number %q", f[i])
				}
				v[i] = uint64(n)
			}
			id := v[0]
			if id == 0 || id >= next || seen[id] {
				return nil, 0, bad("bad or duplicate pattern id %d", id)
			}
			seen[id] = true
			cur = &pattern{id: id, count: v[1], first: int64(v[2]), last: int64(v[3]), weight: int(v[4])}
			out = append(out, cur)
			// The tokens line must follow.
			l, ok := nextLine()
			if !ok || (l != "t" && !strings.HasPrefix(l, "t ")) {
				return nil, 0, bad("pattern %d: want tokens", id)
			}
			toks, err := unquoteAll(l[1:])
			if err != nil {
				return nil, 0, bad("pattern %d: %v", id, err)
			}
			if len(toks) > m.cfg.MaxTokens {
				return nil, 0, bad("pattern %d: %d tokens", id, len(toks))
			}
			for i, t := range toks {
				// Quoted values may hold blanks, never line breaks.
				if t == "" || strings.ContainsAny(t, "\r\n") {
					return nil, 0, bad("pattern %d: bad token %q", id, t)
				}
				toks[i] = m.intern([]byte(t))
			}
			cur.toks = toks
		case "e":
			if cur == nil {
				return nil, 0, bad("example before pattern")
			}
			e, err := strconv.Unquote(rest)
			if err != nil {
				return nil, 0, bad("bad example: %v", err)
			}
			if len(cur.examples) < m.cfg.MaxExamples {
				cur.examples = append(cur.examples, e)
			}
		case "a":
			if cur == nil {
				return nil, 0, bad("alias before pattern")
			}
			for _, s := range strings.Fields(rest) {
				a, err := strconv.ParseUint(s, 10, 64)
				if err != nil || a == 0 || a >= next || seen[a] {
					return nil, 0, bad("bad or duplicate alias %q", s)
				}
				seen[a] = true
				if len(cur.aliases) < maxAliases {
					cur.aliases = append(cur.aliases, a)
				}
			}
		case "":
			// Blank lines are harmless.
		default:
			return nil, 0, bad("unknown record %q", kind)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	return out, next, nil
}

// unquoteAll parses space-separated Go-quoted strings (strconv.Quote keeps
// blanks inside a string, so the quotes delimit, not the blanks).
func unquoteAll(s string) ([]string, error) {
	var out []string
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return out, nil
		}
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, fmt.Errorf("bad quoted token near %.20q", s)
		}
		u, err := strconv.Unquote(q)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
		s = s[len(q):]
	}
}
