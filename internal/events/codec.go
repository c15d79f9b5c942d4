package events

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Segment files (docs/events.md#storage): an 8-byte header, "VGEV", the
// format version and three zero bytes, then records, each
//
//	u32 LE payload length | u32 LE CRC-32C of the payload | payload
//
// and a payload is
//
//	version byte (1) | uvarint id | varint unix nanoseconds |
//	kind, severity, node, job, summary, link (each uvarint length + bytes) |
//	uvarint label count | (key, value)... | uvarint node count | nodes...
const (
	fileMagic     = "VGEV"
	fileVersion   = 1
	fileHeaderLen = 8
	recVersion    = 1
	recHeaderLen  = 8
)

// Bounds of one event: the store clips longer fields when it takes an
// event, and the decoder refuses records beyond them.
const (
	MaxField   = 256  // kind, severity, node, job, link, label keys and values
	MaxSummary = 1024 // summary
	MaxLabels  = 32
	MaxNodes   = 4096 // Nodes beyond are dropped (a job's event carries the count in a label)
	// maxPayload bounds a record: every field at its bound plus varints.
	maxPayload = 1 + 2*binary.MaxVarintLen64 + 5*(MaxField+3) + MaxSummary + 3 + 3 + MaxLabels*2*(MaxField+3) + 3 + MaxNodes*(MaxField+3)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func fileHeader() []byte {
	return []byte{fileMagic[0], fileMagic[1], fileMagic[2], fileMagic[3], fileVersion, 0, 0, 0}
}

func checkFileHeader(b []byte) error {
	if len(b) < fileHeaderLen || string(b[:4]) != fileMagic {
		return errors.New("not an event segment (no VGEV header)")
	}
	if b[4] != fileVersion {
		return fmt.Errorf("event segment version %d, want %d", b[4], fileVersion)
	}
	return nil
}

// appendRecord appends e, framed, to b. e must be sanitised (fields
// within their bounds).
func appendRecord(b []byte, e *Event) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0, recVersion)
	b = binary.AppendUvarint(b, e.ID)
	b = binary.AppendVarint(b, e.Time.UnixNano())
	for _, s := range [...]string{e.Kind, e.Severity, e.Node, e.Job, e.Summary, e.Link} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(e.Labels)))
	for _, k := range sortedKeys(e.Labels) {
		b = appendString(b, k)
		b = appendString(b, e.Labels[k])
	}
	b = binary.AppendUvarint(b, uint64(len(e.Nodes)))
	for _, n := range e.Nodes {
		b = appendString(b, n)
	}
	payload := b[start+recHeaderLen:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(payload, castagnoli))
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Errors of decodeRecord. errShort means the record may be whole once
// more bytes arrive: at a file's end, a torn tail.
var (
	errShort   = errors.New("record cut short")
	errCorrupt = errors.New("corrupt record")
)

// decodeRecord decodes the record at the start of b and returns it and
// its framed length.
func decodeRecord(b []byte) (Event, int, error) {
	if len(b) < recHeaderLen {
		return Event{}, 0, errShort
	}
	n := binary.LittleEndian.Uint32(b)
	if n == 0 || n > maxPayload {
		return Event{}, 0, fmt.Errorf("%w: payload length %d, want 1 to %d", errCorrupt, n, maxPayload)
	}
	if uint64(len(b)-recHeaderLen) < uint64(n) {
		return Event{}, 0, errShort
	}
	payload := b[recHeaderLen : recHeaderLen+int(n)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return Event{}, 0, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	e, err := decodePayload(payload)
	if err != nil {
		return Event{}, 0, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return e, recHeaderLen + int(n), nil
}

func decodePayload(p []byte) (Event, error) {
	var e Event
	if len(p) == 0 || p[0] != recVersion {
		return e, errors.New("unknown record version")
	}
	r := reader{b: p[1:]}
	e.ID = r.uvarint()
	e.Time = time.Unix(0, r.varint()).UTC()
	e.Kind = r.str(MaxField)
	e.Severity = r.str(MaxField)
	e.Node = r.str(MaxField)
	e.Job = r.str(MaxField)
	e.Summary = r.str(MaxSummary)
	e.Link = r.str(MaxField)
	nl := r.uvarint()
	if nl > MaxLabels {
		return e, fmt.Errorf("%d labels, at most %d", nl, MaxLabels)
	}
	if nl > 0 && r.err == nil {
		e.Labels = make(map[string]string, nl)
		for range nl {
			k := r.str(MaxField)
			e.Labels[k] = r.str(MaxField)
		}
	}
	nn := r.uvarint()
	if nn > MaxNodes {
		return e, fmt.Errorf("%d nodes, at most %d", nn, MaxNodes)
	}
	if nn > 0 && r.err == nil {
		e.Nodes = make([]string, 0, min(nn, uint64(len(r.b))))
		for range nn {
			e.Nodes = append(e.Nodes, r.str(MaxField))
			if r.err != nil {
				break
			}
		}
	}
	if r.err != nil {
		return e, r.err
	}
	if len(r.b) != 0 {
		return e, fmt.Errorf("%d bytes after the last field", len(r.b))
	}
	return e, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) str(max int) string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string of %d bytes: at most %d, %d left", n, max, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// sanitize bounds e's fields and fills the defaults: valid printable
// UTF-8 within each field's bound, a known severity, a time.
func sanitize(e *Event, now time.Time) {
	e.Kind = clean(e.Kind, 64)
	if e.Kind == "" {
		e.Kind = "unknown"
	}
	switch e.Severity {
	case SeverityInfo, SeverityWarning, SeverityCritical:
	default:
		e.Severity = SeverityInfo
	}
	e.Node = clean(e.Node, MaxField)
	e.Job = clean(e.Job, MaxField)
	e.Summary = clean(e.Summary, MaxSummary)
	e.Link = clean(e.Link, MaxField)
	if len(e.Nodes) > 0 {
		nodes := make([]string, 0, min(len(e.Nodes), MaxNodes))
		for _, n := range e.Nodes {
			if n = clean(n, MaxField); n != "" && len(nodes) < MaxNodes {
				nodes = append(nodes, n)
			}
		}
		e.Nodes = nodes
		if len(nodes) == 0 {
			e.Nodes = nil
		}
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	e.Time = e.Time.UTC()
	if len(e.Labels) > 0 {
		l := make(map[string]string, min(len(e.Labels), MaxLabels))
		for _, k := range sortedKeys(e.Labels) {
			if len(l) == MaxLabels {
				break
			}
			if ck := clean(k, MaxField); ck != "" {
				l[ck] = clean(e.Labels[k], MaxField)
			}
		}
		e.Labels = l
	}
}

// clean returns s as printable UTF-8 (control characters become spaces)
// of at most max bytes, cut at a character boundary.
func clean(s string, max int) string {
	ok := utf8.ValidString(s) && len(s) <= max
	if ok {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] == 0x7f {
				ok = false
				break
			}
		}
	}
	if ok {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
