package pattern

import "bytes"

// token is one whitespace-separated word of a message, as offsets into the
// message so that tokenizing does not allocate. A variable token keeps a
// constant key prefix ("uid=" of "(uid=0),") of keep bytes and closing
// punctuation ("),") of tail bytes, so "(uid=0)," reads "(uid=<*>),".
type token struct {
	start, end int32
	keep, tail int32
	wild       bool  // obviously variable: masked before any clustering
	flags      uint8 // union of the character classes of its bytes
}

// tokenizer splits messages into tokens and masks the obviously variable
// ones with rules that hold for any log source. It owns its token slice,
// which is valid until the next call of split.
type tokenizer struct {
	toks      []token
	maxTokens int
}

// split tokenizes msg and returns the tokens. When a message has more than
// maxTokens tokens the rest is folded into a final wildcard.
func (tz *tokenizer) split(msg []byte) []token {
	toks := tz.toks[:0]
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
		toks = append(toks, token{start: int32(i), end: int32(j), flags: f})
		i = j
	}
	for k := range toks {
		b := msg[toks[k].start:toks[k].end]
		f := toks[k].flags
		keep := 0
		if f&cKey != 0 {
			keep = keyPrefix(b)
		}
		if isVariable(b[keep:], f) {
			tail := 0
			if keep > 0 {
				// "key=value": keep one separator and the closers of the
				// brackets before the key, so that "ws=null," and
				// "ws=WorkSource{1}," both read "ws=<*>,".
				opens := 0
				for opens < keep && class[b[opens]]&cOpen != 0 {
					opens++
				}
				if c := b[len(b)-1]; (c == ',' || c == ';') && len(b)-keep > 1 {
					tail++
				}
				for opens > 0 && tail < len(b)-keep-1 && class[b[len(b)-1-tail]]&cClose != 0 {
					tail++
					opens--
				}
			} else {
				for tail < len(b)-1 && class[b[len(b)-1-tail]]&cClose != 0 {
					tail++
				}
			}
			if len(b) == 2 && keep == 0 && class[b[0]]&cOpen != 0 && class[b[1]]&cClose != 0 {
				// An empty pair: "()" reads "(<*>)" like "(host)".
				keep, tail = 1, 1
			} else if keep == 0 {
				// Keep opening brackets, but not "<" of "<1 sec".
				for keep < len(b)-tail-1 && class[b[keep]]&cOpen != 0 && b[keep] != '<' {
					keep++
				}
			}
			toks[k].wild, toks[k].keep, toks[k].tail = true, int32(keep), int32(tail)
		}
	}
	for k := range toks {
		if toks[k].wild {
			continue
		}
		b := msg[toks[k].start:toks[k].end]
		switch {
		case isDateName(b):
			// Month and weekday names are variable next to another part
			// of a timestamp ("Sun Jul 10 03:55:15"), not alone ("May").
			if (k+1 < len(toks) && (toks[k+1].wild || isDateName(msg[toks[k+1].start:toks[k+1].end]))) ||
				(k > 0 && toks[k-1].wild && toks[k-1].keep == 0) {
				toks[k].wild = true
			}
		case k > 0 && !toks[k-1].wild && isUserWord(msg[toks[k-1].start:toks[k-1].end]):
			// "user NAME": account names are values.
			toks[k].wild = true
		}
	}
	out := toks[:0]
	for k := 0; k < len(toks); k++ {
		t := msg[toks[k].start:toks[k].end]
		// Drop short parenthesised numbers with units: "5174 bytes
		// (5.05 KB) received" says the same as "426 bytes received".
		if len(t) > 1 && t[0] == '(' && t[len(t)-1] != ')' && hasDigit(t) {
			end := -1
			for e := k + 1; e < len(toks) && e < k+3; e++ {
				te := msg[toks[e].start:toks[e].end]
				if te[len(te)-1] == ')' || (len(te) > 1 && te[len(te)-2] == ')') {
					end = e
					break
				}
			}
			if end > k && isUnitGroup(msg, toks[k+1:end+1]) {
				k = end
				continue
			}
		}
		// A unit after a number belongs to the number: "5 KB", "12 ms".
		if k > 0 && toks[k-1].wild && isUnit(t) && len(out) > 0 && out[len(out)-1].wild && out[len(out)-1].end == toks[k-1].end {
			out[len(out)-1].end = toks[k].end
			out[len(out)-1].tail = 0
			continue
		}
		out = append(out, toks[k])
	}
	toks = out
	// A list of values at the end ("delete blk_1 blk_2 ...", "channels
	// 1 2 3 ...") has no fixed length: fold a run of three or more plain
	// wildcards there into one.
	if n := len(toks); n >= 3 {
		k := n
		for k > 0 && toks[k-1].wild && toks[k-1].keep == 0 && toks[k-1].tail == 0 {
			k--
		}
		if n-k >= 3 {
			toks[k].end = toks[n-1].end
			toks = toks[:k+1]
		}
	}
	if tz.maxTokens > 0 && len(toks) > tz.maxTokens {
		last := tz.maxTokens - 1
		toks[last] = token{start: toks[last].start, end: toks[len(toks)-1].end, wild: true}
		toks = toks[:tz.maxTokens]
	}
	tz.toks = toks
	return toks
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

func isUserWord(b []byte) bool {
	return len(b) == 4 && (b[0]|0x20) == 'u' && (b[1]|0x20) == 's' && (b[2]|0x20) == 'e' && (b[3]|0x20) == 'r'
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
		return !isVersionedName(trimPunct(b))
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
