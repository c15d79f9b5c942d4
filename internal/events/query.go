package events

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// Query limits.
const (
	DefaultLimit = 100
	MaxLimit     = 10000
)

// maxGlob bounds the node glob.
const maxGlob = 128

// Filter selects events; zero fields select all.
type Filter struct {
	Since, Until time.Time // event time, both inclusive
	Kinds        []string
	Severities   []string
	Node         string // a glob (path.Match: * ? [...])
	Job          string
	Before       uint64 // only IDs below
	After        uint64 // only IDs above
	Limit        int    // 0: DefaultLimit; at most MaxLimit
	// Oldest returns the oldest matching events first (a replay), not
	// the newest.
	Oldest bool
}

// Validate checks the glob and the severities.
func (f *Filter) Validate() error {
	if len(f.Node) > maxGlob {
		// A glob is matched against every node name a query's index
		// holds: its length bounds the work.
		return fmt.Errorf("node: glob longer than %d bytes", maxGlob)
	}
	if _, err := path.Match(f.Node, ""); err != nil {
		return fmt.Errorf("node: bad glob %q", f.Node)
	}
	for _, s := range f.Severities {
		if !slices.Contains(severities[:], s) {
			return fmt.Errorf("severity: %q, want one of info, warning, critical", s)
		}
	}
	if f.Limit < 0 {
		return errors.New("limit: must not be negative")
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && f.Until.Before(f.Since) {
		return errors.New("until is before since")
	}
	return nil
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[\\") }

// Match says whether e passes f (the stream's test of live events;
// Before, After and Limit aside).
func (f *Filter) Match(e *Event) bool {
	if !f.Since.IsZero() && e.Time.Before(f.Since) || !f.Until.IsZero() && e.Time.After(f.Until) {
		return false
	}
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, e.Kind) {
		return false
	}
	if len(f.Severities) > 0 && !slices.Contains(f.Severities, e.Severity) {
		return false
	}
	if f.Job != "" && e.Job != f.Job {
		return false
	}
	if f.Node != "" {
		ok, _ := path.Match(f.Node, e.Node)
		for i := 0; !ok && i < len(e.Nodes); i++ {
			ok, _ = path.Match(f.Node, e.Nodes[i])
		}
		if !ok {
			return false
		}
	}
	return true
}

// matcher is a Filter compiled against the index's interned values.
type matcher struct {
	since, until int64
	kinds        []bool // by kind id; nil: any
	sevs         uint8  // bit per severity; 0: any
	nodes        []bool // by node id; nil: any
	node         uint32 // exact node, when nodeExact
	nodeExact    bool
	job          uint32
	jobSet       bool
	multi        [][]uint32 // Store.multi
	none         bool       // nothing can match
}

// compile builds the matcher; s.mu held.
func (s *Store) compile(f *Filter) matcher {
	m := matcher{since: -1 << 63, until: 1<<63 - 1, multi: s.multi}
	if !f.Since.IsZero() {
		m.since = f.Since.UnixNano()
	}
	if !f.Until.IsZero() {
		m.until = f.Until.UnixNano()
	}
	if len(f.Kinds) > 0 {
		m.kinds = make([]bool, len(s.kinds.names)+1)
		any := false
		for _, k := range f.Kinds {
			if id, ok := s.kinds.lookup(k); ok && k != "" {
				m.kinds[min(id, 1<<16-1)] = true
				any = true
			}
		}
		m.none = m.none || !any
	}
	for _, v := range f.Severities {
		m.sevs |= 1 << sevIndex(v)
	}
	if f.Job != "" {
		id, ok := s.jobs.lookup(f.Job)
		m.job, m.jobSet, m.none = id, true, m.none || !ok
	}
	switch {
	case f.Node == "":
	case !isGlob(f.Node):
		id, ok := s.nodes.lookup(f.Node)
		m.node, m.nodeExact, m.none = id, true, m.none || !ok
	default:
		// One glob match per distinct node, not per event.
		m.nodes = make([]bool, len(s.nodes.names))
		for i, n := range s.nodes.names {
			m.nodes[i], _ = path.Match(f.Node, n)
		}
	}
	return m
}

func (m *matcher) match(e *entry) bool {
	if e.t < m.since || e.t > m.until {
		return false
	}
	if m.kinds != nil && (int(e.kind) >= len(m.kinds) || !m.kinds[e.kind]) {
		return false
	}
	if m.sevs != 0 && m.sevs&(1<<e.sev) == 0 {
		return false
	}
	if m.jobSet && e.job != m.job {
		return false
	}
	if !m.nodeExact && m.nodes == nil {
		return true
	}
	if e.node&multiNode == 0 {
		return m.nodeOK(e.node)
	}
	for _, id := range m.multi[e.node&^multiNode] {
		if m.nodeOK(id) {
			return true
		}
	}
	return false
}

func (m *matcher) nodeOK(id uint32) bool {
	if m.nodeExact {
		return id == m.node
	}
	return int(id) < len(m.nodes) && m.nodes[id]
}

// Query returns the events f selects, newest first (oldest first with
// f.Oldest), and, when more match beyond the limit, the ID to pass as
// Before (After with Oldest) for the next page, else 0.
func (s *Store) Query(f Filter) ([]Event, uint64, error) {
	if err := f.Validate(); err != nil {
		return nil, 0, err
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.compile(&f)
	if m.none {
		return []Event{}, 0, nil
	}
	// The entries are in ID order: the ID bounds are a binary search.
	lo := sort.Search(len(s.entries), func(i int) bool { return s.entries[i].id > f.After })
	hi := len(s.entries)
	if f.Before > 0 {
		hi = sort.Search(len(s.entries), func(i int) bool { return s.entries[i].id >= f.Before })
	}
	hits := make([]int, 0, min(limit+1, 256))
	if f.Oldest {
		for i := lo; i < hi && len(hits) <= limit; i++ {
			if m.match(&s.entries[i]) {
				hits = append(hits, i)
			}
		}
	} else {
		for i := hi - 1; i >= lo && len(hits) <= limit; i-- {
			if m.match(&s.entries[i]) {
				hits = append(hits, i)
			}
		}
	}
	var next uint64
	if len(hits) > limit {
		hits = hits[:limit]
		next = s.entries[hits[limit-1]].id
	}
	out := make([]Event, 0, len(hits))
	var buf []byte
	for _, i := range hits {
		e, err := s.read(&s.entries[i], &buf)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, e)
	}
	return out, next, nil
}

// read reads the event of an index entry from its segment; s.mu held.
func (s *Store) read(en *entry, buf *[]byte) (Event, error) {
	k := int(en.seg - s.baseSeq)
	if k < 0 || k >= len(s.segs) || s.segs[k].f == nil {
		return Event{}, fmt.Errorf("events: event %d: segment gone", en.id)
	}
	sg := s.segs[k]
	if cap(*buf) < recHeaderLen {
		*buf = make([]byte, 512)
	}
	b := (*buf)[:cap(*buf)]
	n, err := sg.f.ReadAt(b, int64(en.off))
	if n < recHeaderLen {
		return Event{}, fmt.Errorf("events: read event %d from %s: %v", en.id, sg.path, err)
	}
	e, _, derr := decodeRecord(b[:n])
	if errors.Is(derr, errShort) && n == len(b) {
		// Longer than the buffer: grow it and read again.
		need := recHeaderLen + int(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24)
		if need > recHeaderLen+maxPayload {
			return Event{}, fmt.Errorf("events: event %d in %s: %w", en.id, sg.path, errCorrupt)
		}
		*buf = make([]byte, need)
		if n, err = sg.f.ReadAt(*buf, int64(en.off)); n < need {
			return Event{}, fmt.Errorf("events: read event %d from %s: %v", en.id, sg.path, err)
		}
		e, _, derr = decodeRecord(*buf)
	}
	if derr != nil {
		return Event{}, fmt.Errorf("events: event %d in %s: %w", en.id, sg.path, derr)
	}
	return e, nil
}
