package pattern

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
)

// Merge folds patterns of one length that are equal except at one position
// where at least Config.MinVariants different words occur: a word that
// varies that much is a value, while a handful of alternatives ("VM Paused",
// "VM Resumed") are separate events. mergeKV does the same for "key=value"
// tokens that vary together. Merge repeats until nothing changes, since
// a new wildcard can make further patterns equal. Merged ids become aliases
// of the oldest pattern of each group. Add does the same for each new
// pattern; Merge is for callers that want a full pass, such as after Load
// or at the end of a batch.
func (m *Miner) Merge() {
	lens := make([]int, 0, len(m.byLen))
	for n := range m.byLen {
		lens = append(lens, n)
	}
	slices.Sort(lens)
	for _, n := range lens {
		for changed := true; changed; {
			changed = m.mergeKV(n)
			for i := 0; i < n; i++ {
				if m.mergeAt(n, i) {
					changed = true
				}
			}
		}
	}
}

// mergeAt merges the patterns of length n that agree everywhere but at
// position i when enough variants occur there, and reports whether it
// merged any.
func (m *Miner) mergeAt(n, i int) bool {
	pats := m.byLen[n]
	if len(pats) < 2 {
		return false
	}
	// Sort by a hash of all tokens but the i-th; equal runs are the
	// candidate groups (checked for real equality, hashes can collide).
	keyed := m.keyed[:0]
	for _, p := range pats {
		keyed = append(keyed, keyedPattern{hashExcept(m.seed, p.toks, i), p})
	}
	slices.SortFunc(keyed, func(a, b keyedPattern) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.p.id, b.p.id)
	})
	m.keyed = keyed
	merged := false
	var g []*pattern
	for lo := 0; lo < len(keyed); {
		hi := lo + 1
		for hi < len(keyed) && keyed[hi].key == keyed[lo].key {
			hi++
		}
		if hi-lo >= 2 {
			g = append(g[:0], keyed[lo].p)
			for _, kp := range keyed[lo+1 : hi] {
				if equalExcept(kp.p.toks, keyed[lo].p.toks, i) {
					g = append(g, kp.p)
				}
			}
			if v := m.variants(g, i); len(g) >= 2 && (v == 1 || (v >= m.cfg.MinVariants && keepsContext(g[0].toks, i))) {
				m.fold(g)
				merged = true
			}
		}
		lo = hi
	}
	clear(m.keyed)
	return merged
}

type keyedPattern struct {
	key uint64
	p   *pattern
}

func hashExcept(seed maphash.Seed, toks []string, i int) uint64 {
	h := uint64(len(toks))
	for j, t := range toks {
		if j != i {
			h = h*0x100000001b3 ^ maphash.String(seed, t)
		} else {
			h *= 0x9e3779b97f4a7c15
		}
	}
	return h
}

func equalExcept(a, b []string, i int) bool {
	for j := range a {
		if j != i && a[j] != b[j] {
			return false
		}
	}
	return true
}

// keepsContext reports whether a template still says something once
// position i is a wildcard: at least two constants and half of the tokens.
func keepsContext(toks []string, i int) bool {
	c := 0
	for j, t := range toks {
		if j != i && t != Wildcard {
			c++
		}
	}
	return c >= 2 && 2*c >= len(toks)
}

// kv returns the cached mergeKV grouping key of p.
func (p *pattern) kv() (string, bool) {
	if !p.kvValid {
		p.kvKey, p.kvOK = kvKey(p.toks)
		p.kvValid = true
	}
	return p.kvKey, p.kvOK
}

// kvKey returns the grouping key of a template for mergeKV: tokens with a
// key ("key=value", "call(arg)") reduced to the key. ok is false when no
// such token has a constant value, as then there is nothing to fold, and
// the key is not needed: it is built on the stack and copied out only
// when ok (most templates have none: one allocation each saved).
func kvKey(toks []string) (key string, ok bool) {
	var buf [256]byte
	b := buf[:0]
	for _, t := range toks {
		if k := keyPrefix([]byte(t)); k > 0 && k < len(t) {
			b = append(b, t[:k]...)
			b = append(b, 1)
			if !strings.Contains(t[k:], Wildcard) {
				ok = true
			}
		} else {
			b = append(b, t...)
		}
		b = append(b, 0)
	}
	if !ok {
		return "", false
	}
	return string(b), true
}

// mergeKV folds patterns of length n that differ only in the values of
// "key=value" tokens when at least MinVariants of them occur: values such
// as tag="AudioMix", name=audioserver vary together, so the one-position
// rule of mergeAt never sees them alone.
func (m *Miner) mergeKV(n int) bool {
	pats := m.byLen[n]
	if len(pats) < m.cfg.MinVariants {
		return false
	}
	groups := make(map[string][]*pattern)
	for _, p := range pats {
		if k, ok := p.kv(); ok {
			groups[k] = append(groups[k], p)
		}
	}
	merged := false
	for _, g := range groups {
		if len(g) > 1 && m.kvVariants(g) >= m.cfg.MinVariants {
			m.fold(g)
			merged = true
		}
	}
	return merged
}

// kvVariants counts the variants in a mergeKV group; a member stands for
// as many variants as signatures joined it.
func (m *Miner) kvVariants(g []*pattern) int {
	n := 0
	for _, p := range g {
		n += max(1, p.weight)
	}
	return n
}

// variants counts the different words at position i across g; a member
// with a wildcard there stands for as many words as signatures joined it. One
// variant means the members are identical, which folding always fixes. Words
// that differ only in their numbers ("ib0", "ib1") name numbered instances
// of one thing, which is a value however few of them occur.
// sameButDigits reports whether the members of g have at position i
// different words that are equal but for their digits ("ib0", "ib1";
// "CPU0", "CPU12"): instances of one kind of thing, numbered.
func sameButDigits(g []*pattern, i int) bool {
	first := g[0].toks[i]
	if !strings.ContainsAny(first, "0123456789") || wildIndex(first) >= 0 {
		return false
	}
	differ := false
	for _, p := range g[1:] {
		t := p.toks[i]
		if t == first {
			continue
		}
		if wildIndex(t) >= 0 || !equalButDigits(t, first) {
			return false
		}
		differ = true
	}
	return differ
}

// equalButDigits compares a and b with every run of digits taken as one
// symbol.
func equalButDigits(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		da, db := isDigitByte(a[i]), isDigitByte(b[j])
		if da != db {
			return false
		}
		if da {
			for i < len(a) && isDigitByte(a[i]) {
				i++
			}
			for j < len(b) && isDigitByte(b[j]) {
				j++
			}
			continue
		}
		if a[i] != b[j] {
			return false
		}
		i++
		j++
	}
	return i == len(a) && j == len(b)
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

func (m *Miner) variants(g []*pattern, i int) int {
	if sameButDigits(g, i) {
		return m.cfg.MinVariants
	}
	n := 0
	for k, p := range g {
		if p.toks[i] == Wildcard {
			n += max(1, p.weight)
			continue
		}
		dup := false
		for _, q := range g[:k] {
			if q.toks[i] == p.toks[i] {
				dup = true
				break
			}
		}
		if !dup {
			n++
		}
	}
	return n
}

// mergeNew merges a new pattern p with its siblings where the group varies
// enough, as Merge would, but only looks at the groups p is in.
func (m *Miner) mergeNew(p *pattern) *pattern {
	n := len(p.toks)
	if key, ok := p.kv(); ok {
		var g []*pattern
		for _, q := range m.byLen[n] {
			if k, ok := q.kv(); ok && k == key {
				g = append(g, q)
			}
		}
		if len(g) > 1 && m.kvVariants(g) >= m.cfg.MinVariants {
			p = m.fold(g)
		}
	}
	var cands []*pattern
	var at []int
	for {
		// Siblings that differ from p at exactly one position.
		cands, at = cands[:0], at[:0]
		for _, q := range m.byLen[n] {
			if q == p {
				continue
			}
			if i := oneDiff(p.toks, q.toks); i >= 0 && p.toks[i] != Wildcard {
				cands = append(cands, q)
				at = append(at, i)
			}
		}
		merged := false
		for i := 0; i < n && !merged; i++ {
			g := []*pattern{p}
			for k, q := range cands {
				if at[k] == i {
					g = append(g, q)
				}
			}
			if len(g) >= 2 && m.variants(g, i) >= m.cfg.MinVariants && keepsContext(p.toks, i) {
				p = m.fold(g)
				merged = true
			}
		}
		if !merged {
			return p
		}
	}
}

// oneDiff returns the only position where a and b differ, or -1.
func oneDiff(a, b []string) int {
	at := -1
	for j := range a {
		if a[j] != b[j] {
			if at >= 0 {
				return -1
			}
			at = j
		}
	}
	return at
}

// fold merges g into its oldest pattern, with wildcards where the members
// differ, and returns the survivor.
func (m *Miner) fold(g []*pattern) *pattern {
	dst := g[0]
	for _, p := range g[1:] {
		if p.id < dst.id {
			dst = p
		}
	}
	for _, p := range g {
		for i, t := range p.toks {
			if d := dst.toks[i]; t != d && d != Wildcard {
				// Members that share a key keep it: "tag=<*>".
				if g, ok := generalize(d, t, true); ok {
					dst.toks[i] = g
				} else {
					dst.toks[i] = Wildcard
				}
			}
		}
	}
	dst.changed()
	for _, p := range g {
		if p == dst {
			continue
		}
		// A pattern just created for the message being added has no
		// count and no first time yet: it must not make dst's zero.
		if p.count > 0 && (dst.count == 0 || p.first < dst.first) {
			dst.first = p.first
		}
		dst.count += p.count
		dst.weight += p.weight
		if p.last > dst.last {
			dst.last = p.last
		}
		for _, e := range p.examples {
			if len(dst.examples) >= m.cfg.MaxExamples {
				break
			}
			dst.examples = append(dst.examples, e)
		}
		for _, s := range p.sigs {
			s.pat = dst
		}
		dst.sigs = append(dst.sigs, p.sigs...)
		p.sigs = nil
		m.addAlias(dst, p.id)
		for _, a := range p.aliases {
			m.addAlias(dst, a)
		}
		p.aliases = nil
		m.removePattern(p)
	}
	// A merge counts as a use: dst becomes the most recent pattern.
	m.touchPat(dst)
	return dst
}

// maxAliases bounds the aliases one pattern remembers; the oldest go first.
const maxAliases = 256

func (m *Miner) addAlias(dst *pattern, id uint64) {
	if len(dst.aliases) >= maxAliases {
		delete(m.alias, dst.aliases[0])
		dst.aliases = append(dst.aliases[:0], dst.aliases[1:]...)
	}
	dst.aliases = append(dst.aliases, id)
	m.alias[id] = dst.id
}
