package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Encoder holds the sending side of one connection: the streams (one per
// node, or more for a node whose plugins tick at different intervals) and
// what the peer already knows about each. It is not safe for concurrent use.
type Encoder struct {
	epoch  uint64
	nextID uint64
	bw     bitWriter
	// index maps a stream's descriptors to table indexes while a schema
	// is built; shared by all streams so an idle stream holds no map.
	index  map[*metric.Desc]int32
	byName map[string]int32
	// known locates descriptors already in some stream's table, so
	// another stream with the same series (an aggregator's nodes, a
	// reconnect of thousands of nodes) copies them instead of spelling
	// them out. Entries are checked before use and rebuilt when stale
	// ones pile up.
	known   map[*metric.Desc]descRef
	newd    []int32 // scratch: table indexes a schema frame adds
	streams []*Stream
	entries int // table entries over all streams
	// keyEvery is the number of values frames between a stream's
	// keyframes; <= 0: only when asked.
	keyEvery int
	// stamp is what a schema that copies from a stream records in that
	// stream's lastCopy (a Client's queue sequence number).
	stamp uint64
}

// DefaultKeyframeEvery is how many ticks of a stream go between keyframes:
// a Client that drops a queued tick also drops the stream's later ticks up
// to its next keyframe, so this bounds what one drop costs.
const DefaultKeyframeEvery = 64

// SetKeyframeEvery sets the ticks between a stream's keyframes (<= 0: only
// after Stream.Keyframe).
func (e *Encoder) SetKeyframeEvery(n int) { e.keyEvery = n }

type descRef struct {
	s *Stream
	i int32
}

// valid reports whether r still names d in a table the peer has.
func (e *Encoder) valid(r descRef, d *metric.Desc) bool {
	return r.s.epoch == e.epoch && int(r.i) < r.s.descs.Len() && r.s.descs.At(int(r.i)) == d
}

// remember records the entries a schema added to s, and bounds known.
func (e *Encoder) remember(s *Stream) {
	if len(e.known) > 2*e.entries+1024 {
		clear(e.known)
		for _, st := range e.streams {
			if st.epoch != e.epoch {
				continue
			}
			for i, d := range st.descs.All() {
				if _, ok := e.known[d]; !ok {
					e.known[d] = descRef{st, int32(i)}
				}
			}
		}
	}
	for _, i := range e.newd {
		d := s.descs.At(int(i))
		if r, ok := e.known[d]; !ok || !e.valid(r, d) {
			e.known[d] = descRef{s, i}
		}
	}
}

// dropKnown removes the entries of known that point into s's table, before
// the table changes other than by appending (a reset or a compaction):
// known must not keep alive a descriptor no table holds (which would also
// keep it in the Interner), as series churn for hours.
func (e *Encoder) dropKnown(s *Stream) {
	for _, d := range s.descs.All() {
		if r, ok := e.known[d]; ok && r.s == s {
			delete(e.known, d)
		}
	}
}

// addKnown offers the first n entries of s's table to known again.
func (e *Encoder) addKnown(s *Stream, n int) {
	for i := range n {
		d := s.descs.At(i)
		if _, ok := e.known[d]; !ok {
			e.known[d] = descRef{s, int32(i)}
		}
	}
}

// Stream is one node's series on an Encoder.
type Stream struct {
	// The fields a relayed tick uses come first: one cache line.
	id    uint64
	epoch uint64 // epoch of the encoder whose peer has our table; 0: none
	// What the last AppendTick wrote, for a Client's queue:
	// where its values frame starts in dst, and whether those values
	// decode without the stream's earlier values.
	valuesAt int
	key      bool
	forceKey bool // the next values frame is a keyframe
	fresh    bool // a reset schema was just appended: its values start from zero anyway

	node string

	descs Table          // table known to the peer, by index
	state []valState     // by table index
	seq   []*metric.Desc // order of the last tick
	idx   []int32        // table index of each seq entry

	prevT, prevDt int64

	sinceKey int // values frames since the last keyframe or reset schema
	// lastCopy is the Encoder's stamp when a schema last copied entries
	// of this stream's table.
	lastCopy uint64
}

// Keyframe makes the stream's next values frame a keyframe: coded against
// the initial state, so it decodes without the frames before it.
func (s *Stream) Keyframe() { s.forceKey = true }

// MaxSeries bounds the series of one stream's tick on both sides (a
// receiver's default limit). A stream's table holds at most twice that.
const MaxSeries = 1 << 16

// NewEncoder returns an encoder for a new connection.
func NewEncoder() *Encoder {
	return &Encoder{epoch: 1, nextID: 1, index: map[*metric.Desc]int32{}, byName: map[string]int32{},
		known: map[*metric.Desc]descRef{}, keyEvery: DefaultKeyframeEvery}
}

// NewStream adds a stream for node. Its schema is sent with its first tick.
func (e *Encoder) NewStream(node string) *Stream {
	s := &Stream{}
	e.addStream(s, node)
	return s
}

// addStream makes s, which is zero, a new stream of node.
func (e *Encoder) addStream(s *Stream, node string) {
	s.id, s.node = e.nextID, node
	e.nextID++
	e.streams = append(e.streams, s)
}

// Node is the node the stream carries.
func (s *Stream) Node() string { return s.node }

// Reset starts over for a new connection: every stream sends its full
// schema again and values are coded from scratch.
func (e *Encoder) Reset() { e.epoch++ }

// ErrTooManySeries is returned for a tick above MaxSeries values.
var ErrTooManySeries = errors.New("too many series in one tick")

// AppendTick appends the frames for one tick of s to dst: a schema frame
// when descs differ from the previous tick's (compared by pointer), then a
// values frame. descs must be stable pointers, as plugins keep them; a
// metric.Batch passes its Time, Descs and Values.
func (e *Encoder) AppendTick(dst []byte, s *Stream, t time.Time, descs []*metric.Desc, values []float64) ([]byte, error) {
	if len(descs) != len(values) {
		return dst, fmt.Errorf("node %s: %d descriptors for %d values", s.node, len(descs), len(values))
	}
	if len(descs) > MaxSeries {
		return dst, fmt.Errorf("node %s: %w: %d", s.node, ErrTooManySeries, len(descs))
	}
	changed := s.epoch != e.epoch || len(descs) != len(s.seq)
	if !changed {
		for i, d := range descs {
			if d != s.seq[i] {
				changed = true
				break
			}
		}
	}
	if changed {
		for i, d := range descs {
			if d == nil {
				return dst, fmt.Errorf("node %s: series %d has no descriptor", s.node, i)
			}
		}
		// A new slice, never changed after: a Client keeps it with each
		// tick of this order, to encode the tick again after a reconnect.
		s.seq = append(make([]*metric.Desc, 0, len(descs)), descs...)
		dst = e.appendSchema(dst, s)
	}
	return e.appendValues(dst, s, t, values), nil
}

// appendSchema sends the descriptors of s.seq the peer does not know yet
// and the new order. The table starts over when the peer is new and is
// compacted when series churn would grow it past tableLimit.
func (e *Encoder) appendSchema(dst []byte, s *Stream) []byte {
	clear(e.index)
	for i, d := range s.descs.All() {
		e.index[d] = int32(i)
	}
	reset := s.epoch != e.epoch
	compact := false
	if reset {
		clear(e.index)
		e.dropKnown(s)
		e.entries -= s.descs.Len()
		s.descs = Table{}
		s.state = s.state[:0]
		s.prevT, s.prevDt = 0, 0
		s.epoch = e.epoch
		s.fresh = true
	} else {
		added := 0
		for _, d := range s.seq {
			if _, ok := e.index[d]; !ok {
				added++
			}
		}
		if added > 0 && s.descs.Len()+added > tableLimit(len(s.seq)) {
			compact = true
			e.entries -= s.descs.Len()
			e.dropKnown(s)
			s.compact()
			e.addKnown(s, s.descs.Len())
			e.entries += s.descs.Len()
			clear(e.index)
			for i, d := range s.descs.All() {
				e.index[d] = int32(i)
			}
		}
	}
	// Thousands of streams live in one process (aggregator, simulator):
	// size their slices exactly rather than by append's doubling.
	s.idx = grow(s.idx[:0], len(s.seq))
	added := 0
	for _, d := range s.seq {
		if _, ok := e.index[d]; !ok {
			added++
		}
	}
	s.descs.reserve(added)
	s.state = grow(s.state, added)
	e.newd = e.newd[:0]
	for _, d := range s.seq {
		i, ok := e.index[d]
		if !ok {
			i = int32(s.descs.Len())
			e.index[d] = i
			s.descs.add(d)
			s.state = append(s.state, valState{})
			e.newd = append(e.newd, i)
			e.entries++
		}
		s.idx = append(s.idx, i)
	}
	return e.writeSchema(dst, s, reset, compact, nil)
}

// writeSchema writes the schema frame that adds s.descs' entries e.newd to the
// peer's table of s (after a reset or a compaction when flagged) and sets
// the order: runs, (start, length) pairs of table indexes, or else s.idx.
func (e *Encoder) writeSchema(dst []byte, s *Stream, reset, compact bool, runs []int32) []byte {
	dst, start := beginFrame(dst, frameSchema)
	dst = binary.AppendUvarint(dst, s.id)
	var flags byte
	if reset {
		flags |= schemaReset
	}
	if compact {
		flags |= schemaCompact
	}
	dst = append(dst, flags)
	dst = appendString(dst, s.node)
	dst = binary.AppendUvarint(dst, uint64(len(e.newd)))
	// A new descriptor leaves out fields equal to the previous one in the
	// frame (a family's series), or else takes name, help and label names
	// from an earlier table entry of the same name (a new process, a new
	// interface), so only label values travel.
	clear(e.byName)
	if len(e.newd) > 0 {
		for i := range int(e.newd[0]) {
			d := s.descs.At(i)
			if _, ok := e.byName[d.Name]; !ok {
				e.byName[d.Name] = int32(i)
			}
		}
	}
	var prev *metric.Desc
	for j := 0; j < len(e.newd); {
		i := e.newd[j]
		d := s.descs.At(int(i))
		if r, ok := e.known[d]; ok && r.s != s && e.valid(r, d) {
			// Copy a run of entries from another stream's table.
			k := j + 1
			for k < len(e.newd) && int(r.i)+k-j < r.s.descs.Len() && r.s.descs.At(int(r.i)+k-j) == s.descs.At(int(e.newd[k])) {
				k++
			}
			dst = append(dst, descCopy)
			r.s.lastCopy = e.stamp
			dst = binary.AppendUvarint(dst, r.s.id)
			dst = binary.AppendUvarint(dst, uint64(r.i))
			dst = binary.AppendUvarint(dst, uint64(k-j))
			prev = s.descs.At(int(e.newd[k-1]))
			j = k
			continue
		}
		like := int32(-1)
		if prev == nil || prev.Name != d.Name {
			if k, ok := e.byName[d.Name]; ok && sameShape(s.descs.At(int(k)), d) {
				like = k
			}
		}
		dst = appendDesc(dst, d, prev, like)
		if _, ok := e.byName[d.Name]; !ok {
			e.byName[d.Name] = i
		}
		prev = d
		j++
	}
	e.remember(s)
	if runs != nil {
		return endFrame(appendRuns(dst, runs), start)
	}
	// The order as runs of consecutive table indexes: an unchanged table
	// in table order is one run.
	dst = binary.AppendUvarint(dst, uint64(len(s.idx)))
	next := int32(0)
	for j := 0; j < len(s.idx); {
		k := j + 1
		for k < len(s.idx) && s.idx[k] == s.idx[k-1]+1 {
			k++
		}
		dst = binary.AppendUvarint(dst, zigzag(int64(s.idx[j]-next)))
		dst = binary.AppendUvarint(dst, uint64(k-j))
		next = s.idx[k-1] + 1
		j = k
	}
	return endFrame(dst, start)
}

// Schema flags.
const (
	// schemaReset: the table starts empty (a new connection).
	schemaReset = 1 << iota
	// schemaCompact: before this frame's additions, the table keeps only
	// the entries the previous order used, in table order, with their
	// value state. Series churn (processes coming and going) thus cannot
	// grow the table, nor keep dead descriptors alive.
	schemaCompact
)

// grow returns s with room for n more elements, allocating an eighth
// more than that: tight for thousands of streams, yet a series added now
// and then does not copy the table every time.
func grow[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	need := len(s) + n
	ns := make([]T, len(s), need+need/8)
	copy(ns, s)
	return ns
}

// tableLimit is the table size that triggers compaction when a tick of n
// series adds entries. The spare entries let a series that leaves for a
// while come back without being spelled out again; they are few because
// every receiver on the path (each aggregator level) keeps a copy of every
// node's table with its descriptors: with 2n+64, as before, 20,000 nodes
// whose processes and jobs churn held hours of dead series, several
// hundred bytes each in an aggregator.
func tableLimit(n int) int { return min(n+4+n/64, 2*MaxSeries) }

// compact keeps the table entries used by the previous order (s.idx).
func (s *Stream) compact() {
	s.descs, s.state = compactTable(s.descs, s.state, s.idx)
}

// Descriptor flags: fields equal to the previous descriptor of the frame
// are left out (a family's series share name, help and label names).
const (
	descSameName = 1 << iota
	descSameHelp
	descSameLabelNames
	descLike // name, help, label names of an earlier table entry
	descCopy // a run of entries of another stream's table
)

func sameShape(a, b *metric.Desc) bool {
	if a.Help != b.Help || len(a.Labels) != len(b.Labels) {
		return false
	}
	for i := range a.Labels {
		if a.Labels[i].Name != b.Labels[i].Name {
			return false
		}
	}
	return true
}

func appendDesc(dst []byte, d, prev *metric.Desc, like int32) []byte {
	if like >= 0 {
		dst = append(dst, descLike, byte(d.Type))
		dst = binary.AppendUvarint(dst, uint64(like))
		for _, l := range d.Labels {
			dst = appendString(dst, l.Value)
		}
		return dst
	}
	var flags byte
	if prev != nil {
		if d.Name == prev.Name {
			flags |= descSameName
		}
		if d.Help == prev.Help {
			flags |= descSameHelp
		}
		if len(d.Labels) == len(prev.Labels) {
			flags |= descSameLabelNames
			for i := range d.Labels {
				if d.Labels[i].Name != prev.Labels[i].Name {
					flags &^= descSameLabelNames
					break
				}
			}
		}
	}
	dst = append(dst, flags, byte(d.Type))
	if flags&descSameName == 0 {
		dst = appendString(dst, d.Name)
	}
	if flags&descSameHelp == 0 {
		dst = appendString(dst, d.Help)
	}
	if flags&descSameLabelNames == 0 {
		dst = binary.AppendUvarint(dst, uint64(len(d.Labels)))
	}
	for _, l := range d.Labels {
		if flags&descSameLabelNames == 0 {
			dst = appendString(dst, l.Name)
		}
		dst = appendString(dst, l.Value)
	}
	return dst
}

func (e *Encoder) appendValues(dst []byte, s *Stream, t time.Time, values []float64) []byte {
	s.valuesAt = len(dst)
	typ := frameValues
	key := !s.fresh && (s.forceKey || (e.keyEvery > 0 && s.sinceKey >= e.keyEvery))
	if key {
		// Both sides zero every entry's state, not only this order's: a
		// receiver that missed frames may hold any state for any entry.
		clear(s.state)
		s.prevT, s.prevDt = 0, 0
		typ |= frameKey
	}
	if key || s.fresh {
		s.sinceKey, s.forceKey = 0, false
	}
	s.key, s.fresh = key || s.fresh, false
	s.sinceKey++
	dst, start := beginFrame(dst, typ)
	dst = binary.AppendUvarint(dst, s.id)
	ns := t.UnixNano()
	dt := ns - s.prevT
	dst = binary.AppendUvarint(dst, zigzag(dt-s.prevDt))
	s.prevT, s.prevDt = ns, dt
	dst = binary.AppendUvarint(dst, uint64(len(values)))
	e.bw.buf = dst
	for i, v := range values {
		encodeValue(&e.bw, &s.state[s.idx[i]], v)
	}
	dst = e.bw.flush()
	e.bw.buf = nil
	return endFrame(dst, start)
}

// AppendGap appends a frame saying node's ticks from..to (inclusive) were
// lost, so stores record missing data rather than interpolating.
func AppendGap(dst []byte, node string, from, to time.Time) []byte {
	dst, start := beginFrame(dst, frameGap)
	dst = appendString(dst, node)
	dst = binary.AppendVarint(dst, from.UnixNano())
	dst = binary.AppendVarint(dst, to.UnixNano())
	return endFrame(dst, start)
}

// AppendNodeState appends a frame saying node went up or down at t.
func AppendNodeState(dst []byte, node string, up bool, t time.Time) []byte {
	dst, start := beginFrame(dst, frameNodeState)
	dst = appendString(dst, node)
	var b byte
	if up {
		b = 1
	}
	dst = append(dst, b)
	dst = binary.AppendVarint(dst, t.UnixNano())
	return endFrame(dst, start)
}
