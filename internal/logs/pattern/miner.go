// Package pattern mines log templates online: each message is assigned to a
// pattern such as "Node <*> power budget exceeded! Power=<*>, Limit=<*>";
// patterns keep stable ids, counts, first and last seen times and a few
// examples, and are saved and loaded across restarts.
//
// One configuration serves every log source; no rule names a source.
//
//  1. A message is split on white space and the obviously variable parts
//     of its tokens are masked (token.go). A token is cut into parts at
//     separators and brackets; a part is a value if it holds a digit (not
//     a name such as "ssh2" or "mlx5_core"), is a boolean, long hex, a
//     path, a host name or the rest of a URL, so keys, calls and
//     separators stay: "(uid=0)," reads "(uid=<*>),", "10.0.0.1:22" reads
//     "<*>:<*>". Month and weekday names next to a value, numeric asides "(5.05 KB)" and a unit after a number printed
//     for humans ("6.0 KB", "<1 sec") are values too, and adjacent values
//     join into one ("GET /a HTTP/1.1" reads "GET <*>"; a list of any
//     length reads "<*>").
//  2. The masked token sequence is the message's signature, looked up in a
//     hash map: a known signature costs one tokenization, one hash and one
//     comparison, without allocating.
//  3. A new signature joins a pattern of the same length whose constants it
//     shares (Config.Similarity lowers the bar, Drain style) or starts a new
//     pattern.
//  4. Patterns that differ at one position only are folded into one with a
//     wildcard there once Config.MinVariants different words occur, or
//     words equal but for their numbers ("ib0", "ib1"); a few alternatives
//     ("VM Paused", "VM Resumed") stay separate events. The
//     same holds for patterns differing only in the values of "key=value"
//     tokens. This runs for every new pattern, and Merge runs it over all
//     patterns. Folded ids become aliases of the oldest id of the group.
//
// Memory is bounded: Config.MaxPatterns and Config.MaxSignatures with least
// recently used eviction, a bounded alias list per pattern, bounded examples
// and tokens per message.
//
// Concurrency: a Miner is not safe for concurrent use. Use it from one
// goroutine (the writer), or guard all calls, readers included, with one
// mutex.
package pattern

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
	"time"
)

// Wildcard stands for the variable parts of a template.
const Wildcard = "<*>"

// Config bounds and tunes a Miner. Zero fields take the defaults.
type Config struct {
	// MaxPatterns bounds the number of live patterns; the least recently
	// used one is evicted when a new one would exceed it. Default 10000.
	MaxPatterns int
	// MaxSignatures bounds the exact-signature cache; the least recently
	// used signature is forgotten (its next message is matched again).
	// Default 10 * MaxPatterns.
	MaxSignatures int
	// MaxExamples is the number of example messages kept per pattern.
	// Default 3.
	MaxExamples int
	// MaxExampleBytes truncates stored examples. Default 512.
	MaxExampleBytes int
	// MaxTokens folds the tail of longer messages into one wildcard.
	// Default 128.
	MaxTokens int
	// Similarity is the share of equal constant tokens a new signature
	// needs to join an existing pattern, in (0, 1]. Default 1: a signature
	// joins only a pattern whose constants it all shares; looser joins
	// are left to the variant rule (MinVariants).
	Similarity float64
	// MinVariants is how many different words one position needs before
	// patterns that differ only there are merged into one with a
	// wildcard. Default 4.
	MinVariants int
	// Now is the clock used by Add. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxPatterns <= 0 {
		c.MaxPatterns = 10000
	}
	if c.MaxSignatures <= 0 {
		c.MaxSignatures = 10 * c.MaxPatterns
	}
	if c.MaxExamples < 0 {
		c.MaxExamples = 0
	} else if c.MaxExamples == 0 {
		c.MaxExamples = 3
	}
	if c.MaxExampleBytes <= 0 {
		c.MaxExampleBytes = 512
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 128
	}
	if c.Similarity <= 0 || c.Similarity > 1 {
		c.Similarity = 1
	}
	if c.MinVariants <= 1 {
		c.MinVariants = 4
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Pattern is a snapshot of one mined template.
type Pattern struct {
	ID        uint64
	Template  string
	Count     uint64
	FirstSeen time.Time
	LastSeen  time.Time
	Examples  []string
}

// pattern is the live state of a template. toks holds one entry per token
// position; Wildcard marks a variable position. A token that merely ends in
// Wildcard ("uid=<*>") is a constant key with a variable value.
type pattern struct {
	id          uint64
	toks        []string
	count       uint64
	first, last int64 // unix nanoseconds
	examples    []string
	sigs        []*sig
	weight      int      // signatures that ever joined: evidence of variety
	aliases     []uint64 // ids merged into this one
	template    string   // cached rendering, "" when stale
	kvKey       string   // cached mergeKV key, valid if kvValid
	kvOK        bool
	kvValid     bool
	prev, next  *pattern // LRU, most recent at head
}

// sig is an exact masked token sequence; masked tokens are their key prefix
// followed by Wildcard.
type sig struct {
	hash       uint64
	toks       []string
	pat        *pattern
	chain      *sig // next signature with the same hash
	prev, next *sig // LRU
}

// Miner mines templates from messages. See the package comment for the
// concurrency rules.
type Miner struct {
	cfg    Config
	tz     tokenizer
	sigs   map[uint64]*sig
	nsigs  int
	byLen  map[int][]*pattern
	pats   map[uint64]*pattern
	alias  map[uint64]uint64
	nextID uint64
	strs   map[string]string // interned constant tokens
	seed   maphash.Seed
	keyed  []keyedPattern // scratch for mergeAt

	patHead, patTail *pattern
	sigHead, sigTail *sig
}

// New returns an empty Miner.
func New(cfg Config) *Miner {
	cfg = cfg.withDefaults()
	return &Miner{
		cfg:    cfg,
		tz:     tokenizer{maxTokens: cfg.MaxTokens},
		sigs:   make(map[uint64]*sig),
		byLen:  make(map[int][]*pattern),
		pats:   make(map[uint64]*pattern),
		alias:  make(map[uint64]uint64),
		nextID: 1,
		strs:   make(map[string]string),
		seed:   maphash.MakeSeed(),
	}
}

// Add mines one message at the Config clock's time. See AddAt.
func (m *Miner) Add(msg []byte) (id uint64, isNew bool) {
	return m.AddAt(m.cfg.Now(), msg)
}

// AddAt mines one message seen at t and returns the id of its pattern and
// whether the pattern was created by this message. msg is not retained.
// The pattern's template may still generalise with later messages, and its
// id may later become an alias after Merge; Resolve follows aliases.
func (m *Miner) AddAt(t time.Time, msg []byte) (id uint64, isNew bool) {
	toks := m.tz.split(msg)
	h := hashTokens(&m.tz, msg, toks)
	s := m.lookup(h, msg, toks)
	if s == nil {
		s = m.newSig(h, msg, toks)
		isNew = m.place(s)
	} else {
		m.touchSig(s)
	}
	p := s.pat
	now := t.UnixNano()
	if p.count == 0 || now < p.first {
		p.first = now
	}
	if now > p.last {
		p.last = now
	}
	p.count++
	if len(p.examples) < m.cfg.MaxExamples {
		if p.examples == nil { // room for the usual few at once, not 1, 2, 4
			p.examples = make([]string, 0, min(m.cfg.MaxExamples, 4))
		}
		p.examples = append(p.examples, exampleString(msg, m.cfg.MaxExampleBytes))
	}
	m.touchPat(p)
	return p.id, isNew
}

func exampleString(msg []byte, max int) string {
	if len(msg) > max {
		msg = msg[:max]
	}
	return strings.TrimRight(string(msg), "\r\n")
}

// Resolve follows merge aliases and reports whether id names a live pattern.
func (m *Miner) Resolve(id uint64) (uint64, bool) {
	if _, ok := m.pats[id]; ok {
		return id, true
	}
	if to, ok := m.alias[id]; ok {
		return to, true
	}
	return 0, false
}

// Template returns the current template of pattern id (aliases followed).
func (m *Miner) Template(id uint64) (string, bool) {
	id, ok := m.Resolve(id)
	if !ok {
		return "", false
	}
	return m.pats[id].render(), true
}

// Pattern returns a snapshot of pattern id (aliases followed).
func (m *Miner) Pattern(id uint64) (Pattern, bool) {
	id, ok := m.Resolve(id)
	if !ok {
		return Pattern{}, false
	}
	return m.pats[id].snapshot(), true
}

// Patterns returns snapshots of all live patterns, most recently used first.
func (m *Miner) Patterns() []Pattern {
	out := make([]Pattern, 0, len(m.pats))
	for p := m.patHead; p != nil; p = p.next {
		out = append(out, p.snapshot())
	}
	return out
}

// Len returns the number of live patterns.
func (m *Miner) Len() int { return len(m.pats) }

func (p *pattern) snapshot() Pattern {
	return Pattern{
		ID:        p.id,
		Template:  p.render(),
		Count:     p.count,
		FirstSeen: time.Unix(0, p.first),
		LastSeen:  time.Unix(0, p.last),
		Examples:  append([]string(nil), p.examples...),
	}
}

// changed drops what is cached about p's tokens.
func (p *pattern) changed() {
	p.template = ""
	p.kvValid = false
}

func (p *pattern) render() string {
	if p.template != "" {
		return p.template
	}
	var b strings.Builder
	for i, t := range p.toks {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t)
	}
	p.template = b.String()
	return p.template
}

// hashTokens hashes the masked token sequence eight bytes at a time: one
// multiply per word and per token instead of one per byte (FNV-1a), which
// cost a sixth of mining a new message. The hash only picks a chain of
// signatures, whose tokens are compared, so its quality sets speed, not
// results.
func hashTokens(tz *tokenizer, msg []byte, toks []token) uint64 {
	const mul = 0x9e3779b97f4a7c15
	h := uint64(14695981039346656037)
	for _, t := range toks {
		b := tz.masked(msg, t)
		h ^= uint64(len(b)) // token boundaries: "ab c" is not "a bc"
		for len(b) >= 8 {
			h = (h ^ binary.LittleEndian.Uint64(b)) * mul
			h ^= h >> 29
			b = b[8:]
		}
		// The last 0 to 7 bytes, each read once or twice: injective for
		// a given length, which is hashed too.
		var w uint64
		switch n := len(b); {
		case n >= 4:
			w = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32
		case n > 0:
			w = uint64(b[0]) | uint64(b[n/2])<<8 | uint64(b[n-1])<<16
		}
		h = (h ^ w) * mul
		h ^= h >> 29
	}
	return h
}

func (m *Miner) lookup(h uint64, msg []byte, toks []token) *sig {
	for s := m.sigs[h]; s != nil; s = s.chain {
		if m.sameTokens(s.toks, msg, toks) {
			return s
		}
	}
	return nil
}

func (m *Miner) sameTokens(st []string, msg []byte, toks []token) bool {
	if len(st) != len(toks) {
		return false
	}
	for i, t := range toks {
		if st[i] != string(m.tz.masked(msg, t)) {
			return false
		}
	}
	return true
}

func (m *Miner) intern(b []byte) string {
	if s, ok := m.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(m.strs) >= m.cfg.MaxSignatures {
		// Bound the table: start over; strings in use stay valid, they
		// are just no longer shared with new signatures.
		clear(m.strs)
	}
	m.strs[s] = s
	return s
}

func (m *Miner) internString(s string) string {
	if s == Wildcard {
		return Wildcard
	}
	return s
}

func (m *Miner) newSig(h uint64, msg []byte, toks []token) *sig {
	st := make([]string, len(toks))
	for i, t := range toks {
		st[i] = m.intern(m.tz.masked(msg, t))
	}
	s := &sig{hash: h, toks: st, chain: m.sigs[h]}
	m.sigs[h] = s
	m.nsigs++
	m.pushSig(s)
	for m.nsigs > m.cfg.MaxSignatures {
		m.dropSig(m.sigTail)
	}
	return s
}

// place attaches a new signature to the best matching pattern of its length
// or to a new pattern, and reports whether a pattern was created.
func (m *Miner) place(s *sig) bool {
	n := len(s.toks)
	var best *pattern
	bestSim, bestSame := -1.0, -1
	for _, p := range m.byLen[n] {
		// A pattern that can no longer reach the bar (the best so far,
		// at least Similarity) is left at its first hopeless difference:
		// with the default Similarity of 1, at its first difference.
		same, diff, ok := compareAtLeast(p.toks, s.toks, max(bestSim, m.cfg.Similarity))
		if !ok || same == 0 {
			continue
		}
		sim := float64(same) / float64(same+diff)
		if sim > bestSim || (sim == bestSim && same > bestSame) {
			best, bestSim, bestSame = p, sim, same
		}
	}
	if best != nil && bestSim >= m.cfg.Similarity {
		m.join(best, s)
		return false
	}
	if n == 0 || allWild(s.toks) {
		// Nothing to compare on: one pattern per shape.
		for _, p := range m.byLen[n] {
			if allWild(p.toks) {
				m.join(p, s)
				return false
			}
		}
	}
	p := m.newPattern(append([]string(nil), s.toks...))
	m.join(p, s)
	return m.mergeNew(p) == p
}

func allWild(t []string) bool {
	for _, s := range t {
		if s != Wildcard {
			return false
		}
	}
	return true
}

// compareAtLeast counts positions where template t and signature s have
// the same constant (same) and where t has a constant s does not share
// (diff). It gives up (ok false) as soon as same/(same+diff) is sure to
// end below bar: even if every position left were the same. Division is
// monotonic in floating point too, so a pattern given up on could not
// have reached the bar.
func compareAtLeast(t, s []string, bar float64) (same, diff int, ok bool) {
	for i, pt := range t {
		if pt == Wildcard {
			continue
		}
		if matches(pt, s[i]) {
			same++
			continue
		}
		diff++
		if best := same + len(t) - 1 - i; float64(best)/float64(best+diff) < bar {
			return same, diff, false
		}
	}
	return same, diff, true
}

// matches reports whether template token pt accepts token st.
func matches(pt, st string) bool {
	if pt == st {
		return true
	}
	if strings.IndexByte(pt, '*') < 0 {
		return false // a constant: the common case
	}
	return matchesWild(pt, st)
}

func matchesWild(pt, st string) bool {
	ia := wildIndex(pt)
	if ia < 0 {
		return false
	}
	if ia == wildIndex(st) && pt[:ia] == st[:ia] {
		return true
	}
	k := keyPrefix([]byte(pt)) // does not escape: no allocation
	return k > 0 && k < len(pt) && len(st) > k && pt[:k] == st[:k]
}

// wildIndex is strings.Index(s, Wildcard), quicker for short tokens
// without one.
func wildIndex(s string) int {
	for i := 0; i+len(Wildcard) <= len(s); {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 || i+j+len(Wildcard) > len(s) {
			return -1
		}
		if i += j; s[i+1] == '*' && s[i+2] == '>' {
			return i
		}
		i++
	}
	return -1
}

// generalize returns the token that accepts both a and b, if one does
// short of a plain Wildcard: a itself if they are equal; for two masked
// tokens with the same constant start ("<*>:<*>" and "<*>", "(<*>)," and
// "(<*>)"), that start, a Wildcard and their common closers; for a key
// with a masked value ("uid=<*>") and the same key with any value, or with
// kv, two constant values ("tag=A", "tag=B"), the key and a Wildcard.
func generalize(a, b string, kv bool) (string, bool) {
	if a == b {
		return a, true
	}
	ia, ib := strings.Index(a, Wildcard), strings.Index(b, Wildcard)
	if ia < 0 && ib < 0 && !kv {
		return "", false
	}
	if ia >= 0 && ia == ib && a[:ia] == b[:ib] {
		return a[:ia] + Wildcard + commonClosers(a[ia:], b[ib:]), true
	}
	if k := keyPrefix([]byte(a)); k > 0 && k < len(a) && len(b) > k && a[:k] == b[:k] {
		// Keep a quote or bracket both values open with: tag="<*>".
		for k < len(a)-1 && k < len(b)-1 && a[k] == b[k] && class[a[k]]&cOpen != 0 && a[k] != '<' {
			k++
		}
		return a[:k] + Wildcard + commonClosers(a[k:], b[k:]), true
	}
	return "", false
}

// commonClosers returns the closing punctuation both a and b end with,
// never part of a Wildcard.
func commonClosers(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) {
		c := a[len(a)-1-n]
		if c != b[len(b)-1-n] || class[c]&cClose == 0 || c == '>' {
			break
		}
		n++
	}
	if n >= len(a) || n >= len(b) {
		n = 0 // the whole value would be punctuation
	}
	return a[len(a)-n:]
}

func (m *Miner) join(p *pattern, s *sig) {
	for i, st := range s.toks {
		if p.toks[i] == Wildcard {
			continue
		}
		g, ok := generalize(p.toks[i], st, false)
		if !ok {
			g = Wildcard
		}
		if g != p.toks[i] {
			p.toks[i] = m.internString(g)
			p.changed()
		}
	}
	s.pat = p
	p.sigs = append(p.sigs, s)
	p.weight++
}

func (m *Miner) newPattern(toks []string) *pattern {
	for len(m.pats) >= m.cfg.MaxPatterns && m.patTail != nil {
		m.evict(m.patTail)
	}
	p := &pattern{id: m.nextID, toks: toks}
	m.nextID++
	m.pats[p.id] = p
	m.byLen[len(toks)] = append(m.byLen[len(toks)], p)
	m.pushPat(p)
	return p
}

// evict forgets a pattern, its signatures and its aliases.
func (m *Miner) evict(p *pattern) {
	for _, s := range p.sigs {
		if s.pat == p {
			m.unlinkSig(s)
		}
	}
	p.sigs = nil
	for _, a := range p.aliases {
		delete(m.alias, a)
	}
	m.removePattern(p)
}

func (m *Miner) removePattern(p *pattern) {
	delete(m.pats, p.id)
	l := m.byLen[len(p.toks)]
	for i, q := range l {
		if q == p {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(m.byLen, len(p.toks))
	} else {
		m.byLen[len(p.toks)] = l
	}
	m.unlinkPat(p)
}

// dropSig forgets a signature; its pattern stays.
func (m *Miner) dropSig(s *sig) {
	p := s.pat
	m.unlinkSig(s)
	if p != nil {
		for i, q := range p.sigs {
			if q == s {
				p.sigs = append(p.sigs[:i], p.sigs[i+1:]...)
				break
			}
		}
	}
}

func (m *Miner) unlinkSig(s *sig) {
	// Remove from the hash chain.
	head := m.sigs[s.hash]
	if head == s {
		if s.chain == nil {
			delete(m.sigs, s.hash)
		} else {
			m.sigs[s.hash] = s.chain
		}
	} else {
		for q := head; q != nil; q = q.chain {
			if q.chain == s {
				q.chain = s.chain
				break
			}
		}
	}
	m.nsigs--
	// Remove from the LRU.
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		m.sigHead = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		m.sigTail = s.prev
	}
	s.prev, s.next, s.chain, s.pat = nil, nil, nil, nil
}

func (m *Miner) pushSig(s *sig) {
	s.prev, s.next = nil, m.sigHead
	if m.sigHead != nil {
		m.sigHead.prev = s
	}
	m.sigHead = s
	if m.sigTail == nil {
		m.sigTail = s
	}
}

func (m *Miner) touchSig(s *sig) {
	if m.sigHead == s {
		return
	}
	s.prev.next = s.next
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		m.sigTail = s.prev
	}
	m.pushSig(s)
}

func (m *Miner) pushPat(p *pattern) {
	p.prev, p.next = nil, m.patHead
	if m.patHead != nil {
		m.patHead.prev = p
	}
	m.patHead = p
	if m.patTail == nil {
		m.patTail = p
	}
}

func (m *Miner) unlinkPat(p *pattern) {
	if p.prev != nil {
		p.prev.next = p.next
	} else {
		m.patHead = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else {
		m.patTail = p.prev
	}
	p.prev, p.next = nil, nil
}

func (m *Miner) touchPat(p *pattern) {
	if m.patHead == p {
		return
	}
	m.unlinkPat(p)
	m.pushPat(p)
}
