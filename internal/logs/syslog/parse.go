package syslog

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Field limits of RFC 5424 section 6; RFC 3164 senders get the same, a bit
// more generous for TAG since many exceed its 32 characters.
const (
	maxHost   = 255
	maxApp    = 48
	maxProcID = 128
	maxMsgID  = 32
	maxTag    = 64
)

var bom = "\xef\xbb\xbf"

// Parse parses one frame. A PRI followed by version "1 " selects RFC 5424,
// anything else RFC 3164. It never fails: a frame that follows neither RFC
// is kept with Malformed set and the whole frame as Text. recv is the
// receive time, loc the zone for RFC 3164 timestamps, which carry none.
// The frame is copied once; m's strings point into that copy.
func Parse(frame []byte, recv time.Time, loc *time.Location, m *Message) {
	s := string(trimEnd(frame))
	if is5424(s) {
		_ = Parse5424(s, recv, m)
		return
	}
	_ = Parse3164(s, recv, loc, m)
}

// trimEnd drops the trailing newline, carriage return and NUL bytes some
// senders add to each message.
func trimEnd(b []byte) []byte {
	for len(b) > 0 {
		switch b[len(b)-1] {
		case '\n', '\r', 0:
			b = b[:len(b)-1]
			continue
		}
		break
	}
	return b
}

func is5424(s string) bool {
	_, n, err := parsePRI(s)
	return err == nil && n > 0 && len(s) >= n+2 && s[n] == '1' && s[n+1] == ' '
}

var errNoPRI = errors.New("no PRI")

// parsePRI parses "<N>" at the start of s and returns N and its length.
func parsePRI(s string) (pri int, n int, err error) {
	if len(s) == 0 || s[0] != '<' {
		return 0, 0, errNoPRI
	}
	i := 1
	for i < len(s) && i <= 4 && s[i] >= '0' && s[i] <= '9' {
		pri = pri*10 + int(s[i]-'0')
		i++
	}
	if i == 1 || i > 4 || i >= len(s) || s[i] != '>' {
		return 0, 0, errors.New("bad PRI: want <0..191>")
	}
	if pri > 191 {
		return 0, 0, fmt.Errorf("bad PRI: %d is above 191", pri)
	}
	return pri, i + 1, nil
}

func (m *Message) reset(recv time.Time) {
	*m = Message{Time: recv, Received: recv, Facility: defaultFacility, Severity: defaultSeverity}
}

// malformed keeps the whole frame as the text.
func (m *Message) malformed(s string, err error) error {
	m.Malformed = true
	m.Text = s
	return err
}

// Parse3164 parses a BSD syslog message: [<PRI>][TIMESTAMP SP HOSTNAME SP]
// [TAG[\[PID\]]: ]MSG. The timestamp may be "Mmm dd hh:mm:ss" (year taken
// from recv) or RFC 3339. Without a PRI the facility is user and the severity
// notice, as RFC 3164 section 4.3.3 tells relays. A bad PRI makes the message
// Malformed and is reported; everything else is best effort.
func Parse3164(s string, recv time.Time, loc *time.Location, m *Message) error {
	m.reset(recv)
	pri, n, err := parsePRI(s)
	switch {
	case err == nil:
		m.Facility, m.Severity = uint8(pri>>3), uint8(pri&7)
	case errors.Is(err, errNoPRI):
	default:
		return m.malformed(s, fmt.Errorf("rfc3164: %w", err))
	}
	r := s[n:]
	if t, rest, ok := parse3164Time(r, recv, loc); ok {
		m.Time = t
		r = rest
		// A hostname follows the timestamp unless the next word is the tag.
		if w, rest, ok := cutWord(r); ok && !looksLikeTag(w) && len(w) <= maxHost {
			m.Host = w
			r = rest
		}
	}
	m.App, m.ProcID, r = parseTag(r)
	if m.App == "" && m.Host != "" {
		// After a full header the next word is the TAG even without its
		// colon, as rsyslog reads it and relays it: "host app text".
		if w, rest, ok := cutWord(r); ok && isTagWord(w) {
			m.App, r = w, rest
		}
	}
	m.Text = r
	return nil
}

// isTagWord reports a plain program name: up to maxTag letters, digits and
// "._-/", with a letter.
func isTagWord(w string) bool {
	letter := false
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/':
		default:
			return false
		}
	}
	return letter && len(w) <= maxTag
}

// cutWord splits s at the first space; ok is false when there is no space or
// the word is empty.
func cutWord(s string) (word, rest string, ok bool) {
	i := strings.IndexByte(s, ' ')
	if i <= 0 {
		return "", s, false
	}
	return s[:i], s[i+1:], true
}

func looksLikeTag(w string) bool {
	return strings.HasSuffix(w, ":") || strings.IndexByte(w, '[') >= 0
}

// parseTag reads "TAG: ", "TAG[PID]: " or "TAG[PID] " at the start of s.
// Without that shape there is no tag and s is returned whole.
func parseTag(s string) (app, pid, rest string) {
	i := 0
	for i < len(s) && i <= maxTag && s[i] != ' ' && s[i] != ':' && s[i] != '[' {
		i++
	}
	if i == 0 || i > maxTag || i == len(s) {
		return "", "", s
	}
	tag, r := s[:i], s[i:]
	if r[0] == '[' {
		j := strings.IndexByte(r, ']')
		if j < 0 || j > maxProcID+1 {
			return "", "", s
		}
		pid, r = r[1:j], r[j+1:]
		if r == "" {
			return tag, pid, ""
		}
		if r[0] == ' ' {
			return tag, pid, r[1:]
		}
	}
	if r == "" || r[0] != ':' {
		return "", "", s
	}
	r = r[1:]
	if r != "" && r[0] == ' ' {
		r = r[1:]
	}
	return tag, pid, r
}

var months = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// parse3164Time reads "Mmm dd hh:mm:ss" (with optional fraction) or an RFC
// 3339 timestamp followed by a space.
func parse3164Time(s string, recv time.Time, loc *time.Location) (time.Time, string, bool) {
	if len(s) > 4 && isDigit(s[0]) && isDigit(s[1]) && isDigit(s[2]) && isDigit(s[3]) && s[4] == '-' {
		w, rest, ok := cutWord(s)
		if !ok {
			return time.Time{}, s, false
		}
		t, err := parseRFC3339(w)
		if err != nil {
			return time.Time{}, s, false
		}
		return t, rest, true
	}
	if len(s) < 16 || s[3] != ' ' || s[9] != ':' || s[12] != ':' {
		return time.Time{}, s, false
	}
	mon := 0
	for i, name := range months {
		if s[:3] == name {
			mon = i + 1
			break
		}
	}
	if mon == 0 {
		return time.Time{}, s, false
	}
	day, ok1 := num2(s[4], s[5])
	hh, ok2 := num2(s[7], s[8])
	mm, ok3 := num2(s[10], s[11])
	ss, ok4 := num2(s[13], s[14])
	if !ok1 || !ok2 || !ok3 || !ok4 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60 {
		return time.Time{}, s, false
	}
	if ss == 60 { // leap second: keep the message, lose the second
		ss = 59
	}
	i := 15
	nsec := 0
	if s[i] == '.' {
		i++
		scale := 100_000_000
		for i < len(s) && isDigit(s[i]) {
			nsec += int(s[i]-'0') * scale
			scale /= 10
			i++
		}
	}
	if i >= len(s) || s[i] != ' ' {
		return time.Time{}, s, false
	}
	if loc == nil {
		loc = time.Local
	}
	rl := recv.In(loc)
	t := time.Date(rl.Year(), time.Month(mon), day, hh, mm, ss, nsec, loc)
	// No year on the wire: a date more than a month ahead was sent last year
	// (December messages received in January).
	if t.Sub(recv) > 31*24*time.Hour {
		t = t.AddDate(-1, 0, 0)
	}
	return t, s[i+1:], true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// num2 reads a two-digit number; a leading space counts as zero (" 2").
func num2(a, b byte) (int, bool) {
	if a == ' ' {
		a = '0'
	}
	if !isDigit(a) || !isDigit(b) {
		return 0, false
	}
	return int(a-'0')*10 + int(b-'0'), true
}

// parseRFC3339 accepts RFC 3339 timestamps with lower-case 't' and 'z' and a
// leap second, which time.Parse rejects.
func parseRFC3339(s string) (time.Time, error) {
	if strings.ContainsAny(s, "tz") {
		s = strings.Map(func(r rune) rune {
			switch r {
			case 't':
				return 'T'
			case 'z':
				return 'Z'
			}
			return r
		}, s)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && len(s) >= 19 && s[17:19] == "60" {
		if t2, err2 := time.Parse(time.RFC3339Nano, s[:17]+"59"+s[19:]); err2 == nil {
			return t2, nil
		}
	}
	return t, err
}

// Parse5424 parses <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID SD [MSG].
// "-" fields stay empty (the time is then recv); a leading BOM and
// leading spaces of MSG are dropped. On error the message is Malformed with the whole frame as Text
// and the fields read so far set.
func Parse5424(s string, recv time.Time, m *Message) error {
	m.reset(recv)
	pri, n, err := parsePRI(s)
	if err != nil {
		return m.malformed(s, fmt.Errorf("rfc5424: %w", err))
	}
	m.Facility, m.Severity = uint8(pri>>3), uint8(pri&7)
	r := s[n:]
	if len(r) < 2 || r[0] != '1' || r[1] != ' ' {
		return m.malformed(s, errors.New("rfc5424: want version 1"))
	}
	r = r[2:]
	var ts string
	fields := [...]struct {
		name string
		max  int
		dst  *string
	}{
		{"TIMESTAMP", 64, &ts},
		{"HOSTNAME", maxHost, &m.Host},
		{"APP-NAME", maxApp, &m.App},
		{"PROCID", maxProcID, &m.ProcID},
		{"MSGID", maxMsgID, &m.MsgID},
	}
	for _, f := range fields {
		i := strings.IndexByte(r, ' ')
		if i < 0 {
			return m.malformed(s, fmt.Errorf("rfc5424: message ends before %s", f.name))
		}
		v := r[:i]
		r = r[i+1:]
		if v == "" || len(v) > f.max {
			return m.malformed(s, fmt.Errorf("rfc5424: bad %s %s", f.name, quote(v)))
		}
		if v != "-" {
			*f.dst = v
		}
		if f.dst == &ts && v != "-" {
			t, err := parseRFC3339(v)
			if err != nil {
				return m.malformed(s, fmt.Errorf("rfc5424: bad TIMESTAMP %s", quote(v)))
			}
			m.Time = t
		}
	}
	sd, rest, err := cutSD(r)
	if err != nil {
		return m.malformed(s, fmt.Errorf("rfc5424: %w", err))
	}
	m.SD = sd
	if rest != "" {
		if rest[0] != ' ' {
			return m.malformed(s, errors.New("rfc5424: want space after STRUCTURED-DATA"))
		}
		// rsyslog's RFC 5424 templates keep the space that followed the
		// tag in the message; no sender means leading blanks.
		rest = strings.TrimLeft(strings.TrimPrefix(rest[1:], bom), " ")
	}
	m.Text = rest
	return nil
}

// cutSD splits off STRUCTURED-DATA: "-" or one or more [ID PARAM="VALUE"...]
// elements, where \" \\ and \] escape inside values.
func cutSD(s string) (sd, rest string, err error) {
	if s == "" {
		return "", "", errors.New("message ends before STRUCTURED-DATA")
	}
	if s[0] == '-' {
		return "", s[1:], nil
	}
	if s[0] != '[' {
		return "", s, errors.New("STRUCTURED-DATA must be - or start with [")
	}
	i := 0
	for i < len(s) && s[i] == '[' {
		i++
		inQuote := false
		closed := false
		for i < len(s) && !closed {
			c := s[i]
			switch {
			case inQuote && c == '\\':
				i++
			case c == '"':
				inQuote = !inQuote
			case !inQuote && c == ']':
				closed = true
			}
			i++
		}
		if !closed {
			return "", s, errors.New("unterminated STRUCTURED-DATA element")
		}
	}
	return s[:i], s[i:], nil
}
