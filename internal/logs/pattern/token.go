package pattern

import "bytes"

// token is one whitespace-separated word of a message, as offsets into the
// message so that tokenizing does not allocate. A variable token has a
// masked form, at mask[ms:me] of the tokenizer, in which each variable part
// reads Wildcard and the constant parts stay: "(uid=0)," reads
// "(uid=<*>),", "10.0.0.1:22" reads "<*>:<*>".
type token struct {
	start, end int32
	ms, me     int32 // masked form in tokenizer.mask, if wild
	wild       bool  // obviously variable: masked before any clustering
}

// tokenizer splits messages into tokens and masks the obviously variable
// ones with rules that hold for any log source. It owns its token slice
// and mask buffer, which are valid until the next call of split.
type tokenizer struct {
	toks      []token
	mask      []byte
	maxTokens int
}

// masked returns the form of token t as it enters a signature.
func (tz *tokenizer) masked(msg []byte, t token) []byte {
	if t.wild {
		return tz.mask[t.ms:t.me]
	}
	return msg[t.start:t.end]
}

// setMask makes toks[k] variable with the masked form b.
func (tz *tokenizer) setMask(toks []token, k int, b ...[]byte) {
	ms := len(tz.mask)
	for _, x := range b {
		tz.mask = append(tz.mask, x...)
	}
	toks[k].wild, toks[k].ms, toks[k].me = true, int32(ms), int32(len(tz.mask))
}

// pure reports whether token t is variable as a whole: "<*>", maybe
// followed by closing punctuation.
func (tz *tokenizer) pure(t token) bool {
	if !t.wild {
		return false
	}
	b := tz.mask[t.ms:t.me]
	if len(b) < len(Wildcard) || string(b[:len(Wildcard)]) != Wildcard {
		return false
	}
	for _, c := range b[len(Wildcard):] {
		if class[c]&cClose == 0 || c == '>' {
			return false
		}
	}
	return true
}

// allMasked reports whether token t is variable throughout: Wildcards and
// punctuation only, as "<*>:<*>:<*>" of a time.
func (tz *tokenizer) allMasked(t token) bool {
	if !t.wild {
		return false
	}
	b := tz.mask[t.ms:t.me]
	for i := 0; i < len(b); i++ {
		if c := b[i]; isLetter(c) || class[c]&cDigit != 0 {
			return false
		} else if c == '<' && i+len(Wildcard) <= len(b) && string(b[i:i+len(Wildcard)]) == Wildcard {
			i += len(Wildcard) - 1
		}
	}
	return true
}

// isHumanNumber reports a number formatted for people rather than in a
// fixed unit: with a fraction ("6.0") or a bound ("<1").
func isHumanNumber(b []byte) bool {
	return len(b) > 1 && (b[0] == '<' || b[0] == '>' || b[0] == '~' || bytes.IndexByte(b, '.') >= 0)
}

var wildcard = []byte(Wildcard)

// split tokenizes msg and returns the tokens. When a message has more than
// maxTokens tokens the rest is folded into a final wildcard.
func (tz *tokenizer) split(msg []byte) []token {
	toks := tz.toks[:0]
	tz.mask = tz.mask[:0]
	n := len(msg)
	for i := 0; i < n; {
		for i < n && class[msg[i]]&cSpace != 0 {
			i++
		}
		if i >= n {
			break
		}
		j := i
		var f uint8 // classes seen in the token: cheap hints for the rules
		for j < n {
			c := class[msg[j]]
			if c&cSpace != 0 {
				break
			}
			f |= c
			j++
		}
		if f&cKey != 0 {
			j, f = quotedValue(msg, i, j, f)
		}
		t := token{start: int32(i), end: int32(j)}
		if f == 0 && plainConstant(msg[i:j]) {
			toks = append(toks, t) // a word, as most tokens are: skip the rules
			i = j
			continue
		}
		ms := len(tz.mask)
		if tz.mask, t.wild = maskToken(tz.mask, msg[i:j], f); t.wild {
			t.ms, t.me = int32(ms), int32(len(tz.mask))
		}
		toks = append(toks, t)
		i = j
	}
	for k := range toks {
		if toks[k].wild {
			continue
		}
		b := msg[toks[k].start:toks[k].end]
		// Month and weekday names are variable next to another part of a
		// timestamp ("Sun Jul 10 03:55:15"), not alone ("May").
		if isDateName(b) && ((k+1 < len(toks) && (toks[k+1].wild || isDateName(msg[toks[k+1].start:toks[k+1].end]))) ||
			(k > 0 && tz.allMasked(toks[k-1]))) {
			tz.setMask(toks, k, wildcard, closers(b))
		}
	}
	// Rewrite in place: out never overtakes k.
	out := toks[:0]
	for k := 0; k < len(toks); k++ {
		if !toks[k].wild && (len(out) == 0 || !out[len(out)-1].wild) {
			out = append(out, toks[k]) // constant after constant: the common case
			continue
		}
		t := msg[toks[k].start:toks[k].end]
		// Drop short parenthesised numbers with units: "5174 bytes
		// (5.05 KB) received" says the same as "426 bytes received".
		if len(t) > 1 && t[0] == '(' && t[len(t)-1] != ')' && toks[k].wild {
			end := -1
			for e := k + 1; e < len(toks) && e < k+3; e++ {
				te := msg[toks[e].start:toks[e].end]
				if te[len(te)-1] == ')' || (len(te) > 1 && te[len(te)-2] == ')') {
					end = e
					break
				}
			}
			if end > k && hasDigit(t) && isUnitGroup(msg, toks[k+1:end+1]) {
				k = end
				continue
			}
		}
		last := len(out) - 1
		if last < 0 || !toks[k].wild && !toks[last].wild {
			out = append(out, toks[k])
			continue
		}
		// A unit after a number printed for humans belongs to the number:
		// "6.0 KB" becomes "1.2 MB" and "<1 sec" becomes "00:17" as the
		// magnitude changes, while "2048 MB" and "10 ms" are printed in
		// a fixed unit, which stays.
		if !toks[k].wild && out[last].end == toks[k-1].end && tz.pure(toks[k-1]) &&
			isUnit(t) && isHumanNumber(msg[toks[k-1].start:toks[k-1].end]) {
			out[last].end = toks[k].end
			tz.setMask(out, last, wildcard, closers(t))
			continue
		}
		// A value that ends in a Wildcard and one that starts with one
		// are one value: a value with blanks or a list of values of any
		// length is one wildcard. "GET /a/b HTTP/1.1" reads "GET <*>",
		// "delete blk_1 blk_2 blk_3" reads "delete <*>" and "Jul 27
		// 10:59:53 2005" reads "<*>:<*>:<*>".
		if toks[k].wild && out[last].wild {
			a, b := tz.mask[out[last].ms:out[last].me], tz.mask[toks[k].ms:toks[k].me]
			if bytes.HasSuffix(a, wildcard) && bytes.HasPrefix(b, wildcard) {
				out[last].end = toks[k].end
				if len(a)+len(b) > maxJoined {
					tz.setMask(out, last, wildcard) // bounds the copying
				} else {
					tz.setMask(out, last, a, b[len(Wildcard):])
				}
				continue
			}
		}
		out = append(out, toks[k])
	}
	toks = out
	if tz.maxTokens > 0 && len(toks) > tz.maxTokens {
		last := tz.maxTokens - 1
		toks[last] = token{start: toks[last].start, end: toks[len(toks)-1].end}
		tz.setMask(toks, last, wildcard)
		toks = toks[:tz.maxTokens]
	}
	tz.toks = toks
	return toks
}

// maxJoined bounds the masked form of joined values; a longer one reads
// as a plain Wildcard.
const maxJoined = 64

// closers returns the trailing separators and closing brackets of b.
func closers(b []byte) []byte {
	i := len(b)
	for i > 0 && class[b[i-1]]&cClose != 0 && b[i-1] != '>' {
		i--
	}
	return b[i:]
}

// plainConstant reports, for a token b with no classed byte (f == 0: no
// digit, bracket, dot, slash, key or separator), the cases in which
// maskToken surely leaves it constant; it answers false whenever a rule
// might apply (sentence punctuation to trim, a literal such as "true" or
// "null", a long word that may be hex), and maskToken decides.
func plainConstant(b []byte) bool {
	n := len(b)
	if c := b[n-1]; c == '!' || c == '?' {
		return false
	}
	switch {
	case n < 3 || n == 6 || n == 7:
		return true
	case n <= 5:
		// The literals of isVariable start with one of these.
		c := b[0]
		return c != 't' && c != 'f' && c != 'n' && c != 'N' && c != 'T' && c != 'F'
	}
	return false
}

// maskToken appends the masked form of token b to dst and reports whether
// any part of b is variable. b is cut into parts at separators and
// brackets (":", "=", ",", "(", "[", "@", "#", "|", quotes...); parts that
// are values (see isVariable) read Wildcard, the rest stays, so keys,
// calls and separators survive: "(maxRetries=10," reads
// "(maxRetries=<*>,". After "://" the rest of a URL is one part.
func maskToken(dst, b []byte, f uint8) ([]byte, bool) {
	if f&cSep == 0 {
		// One part, as most words are.
		e := len(b)
		for e > 1 && (b[e-1] == '.' || b[e-1] == '!' || b[e-1] == '?') {
			e--
		}
		if isVariable(b[:e], f) {
			return append(append(dst, Wildcard...), b[e:]...), true
		}
		return dst, false
	}
	n := len(dst)
	dst, wild := scanToken(dst, b, f, true)
	if !wild {
		return dst[:n], false
	}
	return dst, true
}

// scanToken is maskToken; it appends to dst only if write is set.
func scanToken(dst, b []byte, f uint8, write bool) ([]byte, bool) {
	if len(b) == 2 && class[b[0]]&cOpen != 0 && class[b[1]]&cClose != 0 && b[0] != '<' {
		// An empty pair: "()" reads "(<*>)" like "(host)".
		if write {
			dst = append(append(append(dst, b[0]), Wildcard...), b[1])
		}
		return dst, true
	}
	wild := false
	for i := 0; i < len(b); {
		c := b[i]
		if sep[c]&sSep != 0 && !((c == '<' || c == '>') && i+1 < len(b) && class[b[i+1]]&cDigit != 0) {
			if c == ':' && i+2 < len(b) && b[i+1] == '/' && b[i+2] == '/' {
				// A URL: the scheme stays, the rest up to a closer is
				// one value.
				j := i + 3
				for j < len(b) && sep[b[j]]&sURLEnd == 0 {
					j++
				}
				if write {
					dst = append(dst, b[i:i+3]...)
				}
				if j > i+3 {
					if write {
						dst = append(dst, Wildcard...)
					}
					wild = true
				}
				i = j
				continue
			}
			if write {
				dst = append(dst, c)
			}
			i++
			continue
		}
		j := i + 1     // a bound "<1" is one value
		pf := class[c] // the part's classes, hints for isVariable
		for j < len(b) && sep[b[j]]&sSep == 0 {
			pf |= class[b[j]]
			j++
		}
		part := b[i:j]
		// Sentence punctuation after a value stays: "port 8030." .
		e := len(part)
		for e > 1 && (part[e-1] == '.' || part[e-1] == '!' || part[e-1] == '?') {
			e--
		}
		// A name before "(" is a call, "workerEnv.init()", not a host.
		if isVariable(part[:e], pf) && (j == len(b) || b[j] != '(' || pf&cDigit != 0) {
			if write {
				dst = append(append(dst, Wildcard...), part[e:]...)
			}
			wild = true
			if e == len(part) && j < len(b) && b[j] == '>' {
				j++ // "<*>>" reads as one wildcard: "<id: 0x7f>" is "<id: <*>"
			}
		} else if write {
			dst = append(dst, part...)
		}
		i = j
	}
	return dst, wild
}

// maxQuoted bounds how far a quoted value may reach.
const maxQuoted = 256

// quotedValue extends the token msg[i:j] to the closing quote when it
// starts a quoted value with spaces, as in tag="View Lock", so that the
// value is one token and the message keeps its length. It returns the new
// end and classes.
func quotedValue(msg []byte, i, j int, f uint8) (int, uint8) {
	b := msg[i:j]
	k := keyPrefix(b)
	if k == 0 || k >= len(b) || b[k] != '"' || bytes.IndexByte(b[k+1:], '"') >= 0 {
		return j, f
	}
	q := bytes.IndexByte(msg[j:min(len(msg), j+maxQuoted)], '"')
	if q < 0 || bytes.IndexByte(msg[j:j+q], '\n') >= 0 {
		return j, f
	}
	e := j + q + 1
	for e < len(msg) && class[msg[e]]&cSpace == 0 {
		e++
	}
	for _, c := range msg[j:e] {
		f |= class[c]
	}
	return e, f &^ cSpace
}

// keyPrefix returns the length of a "key=", "key:" or "call(" prefix made
// of letters (with an optional opening bracket), 0 if there is none.
func keyPrefix(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == '(' || b[i] == '[' || b[i] == '{') {
		i++
	}
	start := i
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-':
		case (c == '=' || c == ':' || c == '(') && i > start:
			return i + 1
		default:
			return 0
		}
	}
	return 0
}

// isUnitGroup reports whether the tokens after an opening "(123" are all
// units, e.g. "KB)".
func isUnitGroup(msg []byte, toks []token) bool {
	for _, t := range toks {
		b := msg[t.start:t.end]
		for len(b) > 0 && (b[len(b)-1] == ')' || b[len(b)-1] == ',') {
			b = b[:len(b)-1]
		}
		if !isUnit(b) && !hasDigit(b) {
			return false
		}
	}
	return true
}

func hasDigit(b []byte) bool {
	for _, c := range b {
		if class[c]&cDigit != 0 {
			return true
		}
	}
	return false
}

// isVariable reports whether a token (a value, once a key prefix is cut
// off) is obviously variable, whatever the log source: it holds a digit
// (numbers, addresses, ids, times) unless it is a versioned name such as
// "ssh2"; it is an empty pair "()", a boolean or null, a long hex string, a
// path, a qualified name with a slash, or a host name. f holds the
// character classes of the whole token, to skip checks cheaply.
func isVariable(b []byte, f uint8) bool {
	if f&cDigit != 0 && hasDigit(b) {
		b = trimPunct(b)
		return !isVersionedName(b) && !isIdentifier(b)
	}
	if len(b) == 2 && class[b[0]]&cOpen != 0 && class[b[1]]&cClose != 0 {
		// Empty brackets or quotes hold an empty value: "()", "''".
		return true
	}
	b = trimPunct(b)
	switch {
	case len(b) >= 3 && len(b) <= 5:
		switch string(b) {
		case "true", "false", "null", "nil", "none", "None", "NULL", "True", "False":
			return true
		}
	case len(b) >= 8 && f&cSlash == 0 && isHex(b):
		return true
	case len(b) == 0:
		return false
	}
	if f&cSlash != 0 {
		if b[0] == '/' && len(b) > 1 {
			return true // a path
		}
		if bytes.IndexByte(b, '/') > 0 && bytes.IndexByte(b, '.') >= 0 {
			return true // a qualified name: "com.example.app/.MainActivity"
		}
	}
	return f&cDot != 0 && isHostname(b)
}

// Character classes, as tables: the tokenizer runs for every message.
const (
	cSpace = 1 << iota
	cDigit
	cOpen  // leading bracket or quote
	cClose // trailing bracket, quote or separator
	cDot
	cSlash
	cKey // ends a key: '=', ':', '('
	cSep // cuts a token into parts, see maskToken
)

var class = func() (t [256]uint8) {
	for _, c := range " \t\r\n\v\f" {
		t[c] |= cSpace
	}
	for c := '0'; c <= '9'; c++ {
		t[c] |= cDigit
	}
	for _, c := range "([{<'\"" {
		t[c] |= cOpen
	}
	for _, c := range ")]}>'\",;:." {
		t[c] |= cClose
	}
	t['.'] |= cDot
	t['/'] |= cSlash
	t['='] |= cKey
	t[':'] |= cKey
	t['('] |= cKey
	for _, c := range ":=,;()[]{}<>@#|\"'`" {
		t[c] |= cSep
	}
	return t
}()

// Separators cut a token into parts (maskToken); a URL's value ends at a
// URL closer.
const (
	sSep = 1 << iota
	sURLEnd
)

var sep = func() (t [256]uint8) {
	for _, c := range ":=,;()[]{}<>@#|\"'`" {
		t[c] |= sSep
	}
	for _, c := range ",;)]}>\"'`" {
		t[c] |= sURLEnd
	}
	return t
}()

// trimPunct strips brackets, quotes and trailing separators.
func trimPunct(b []byte) []byte {
	for len(b) > 0 && class[b[0]]&cOpen != 0 {
		b = b[1:]
	}
	for len(b) > 0 && class[b[len(b)-1]]&cClose != 0 {
		b = b[:len(b)-1]
	}
	return b
}

// isHostname reports a dotted name ending in a lower-case label of two to
// six letters, like "zummit.com" or "massive.merukuru.org".
func isHostname(b []byte) bool {
	dot := -1
	for i, c := range b {
		switch {
		case c >= 'A' && c <= 'Z' && i > 0 && b[i-1] >= 'a' && b[i-1] <= 'z':
			return false // camelCase is code: "NameSystem.delete"
		case c == '.':
			if i == 0 || b[i-1] == '.' {
				return false
			}
			dot = i
		case c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		default:
			return false
		}
	}
	if dot < 0 {
		return false
	}
	tld := b[dot+1:]
	if len(tld) < 2 || len(tld) > 6 {
		return false
	}
	for _, c := range tld {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func isUnit(b []byte) bool {
	for len(b) > 0 && (b[len(b)-1] == ')' || b[len(b)-1] == ',' || b[len(b)-1] == ';') {
		b = b[:len(b)-1]
	}
	switch string(b) {
	case "B", "KB", "kB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
		"ms", "us", "ns", "sec", "secs", "%":
		return true
	}
	return false
}

func isDateName(b []byte) bool {
	if len(b) < 3 || len(b) > 4 {
		return false
	}
	for len(b) > 0 && (b[len(b)-1] == ',' || b[len(b)-1] == '.') {
		b = b[:len(b)-1]
	}
	switch string(b) {
	case "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun",
		"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec":
		return true
	}
	return false
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9') && !(c >= 'a' && c <= 'f') && !(c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// isIdentifier reports names with short numbers inside, such as
// "mlx5_core" or "jk2_init": they start and end with a letter and no run
// of digits is longer than two. Values with letters ("blk_38",
// "0x1f", "task_0012_m") fail one of these.
func isIdentifier(b []byte) bool {
	if len(b) < 3 || !isLetter(b[0]) || !isLetter(b[len(b)-1]) || isHex(b) {
		return false
	}
	run := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if run++; run > 2 {
				return false
			}
		case isLetter(c) || c == '_':
			run = 0
		default:
			return false // host names, dates, versions: "n1-sa-41.example.com"
		}
	}
	return true
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// isVersionedName reports names such as "ssh2", "IPV4" or "SOCKS5": letters
// and a short number suffix name a protocol or device, not a value.
func isVersionedName(b []byte) bool {
	i := 0
	for i < len(b) && ((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= 'A' && b[i] <= 'Z')) {
		i++
	}
	if i < 2 || len(b)-i > 1 || len(b) == i {
		return false
	}
	for _, c := range b[i:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
