package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Handler receives what a connection carries. Slices passed to it are valid
// only during the call. A server calls it from one goroutine per
// connection, so implementations must be safe for concurrent use.
//
// A node usually has one stream; a sampler whose plugins tick at different
// intervals sends one stream per interval, each with its own Schema.
type Handler interface {
	Connect(p Peer)
	Disconnect(p Peer, err error)
	// Schema announces the series of the following Ticks of a stream of
	// node, in order. Descriptors are interned: the same series is the same
	// pointer on every tick, across streams and connections.
	Schema(node string, descs []*metric.Desc)
	Tick(node string, t time.Time, descs []*metric.Desc, values []float64)
	Gap(node string, from, to time.Time)
	NodeState(node string, up bool, t time.Time)
}

// Peer identifies a connection.
type Peer struct {
	Addr string // remote address
	Name string // name the peer gave in its hello
}

// NopHandler ignores everything; embed it to implement part of Handler.
type NopHandler struct{}

func (NopHandler) Connect(Peer)                                      {}
func (NopHandler) Disconnect(Peer, error)                            {}
func (NopHandler) Schema(string, []*metric.Desc)                     {}
func (NopHandler) Tick(string, time.Time, []*metric.Desc, []float64) {}
func (NopHandler) Gap(string, time.Time, time.Time)                  {}
func (NopHandler) NodeState(string, bool, time.Time)                 {}

// Limits bound what one connection may make the receiver hold.
type Limits struct {
	MaxFrame       int // payload bytes per frame
	MaxStreams     int // streams per connection
	MaxSeries      int // series per tick of a stream
	MaxTotalSeries int // descriptor-table entries over all streams of a connection
}

// DefaultLimits fit an aggregator forwarding 20,000 nodes of a few
// hundred series over one connection.
var DefaultLimits = Limits{
	MaxFrame:       DefaultMaxFrame,
	MaxStreams:     100_000,
	MaxSeries:      MaxSeries,
	MaxTotalSeries: 20_000_000,
}

func (l Limits) withDefaults() Limits {
	if l.MaxFrame <= 0 {
		l.MaxFrame = DefaultLimits.MaxFrame
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = DefaultLimits.MaxStreams
	}
	if l.MaxSeries <= 0 {
		l.MaxSeries = DefaultLimits.MaxSeries
	}
	if l.MaxTotalSeries <= 0 {
		l.MaxTotalSeries = DefaultLimits.MaxTotalSeries
	}
	return l
}

// Interner maps descriptor contents to one shared *metric.Desc, so 20,000
// nodes with the same series share one set of descriptors and consumers can
// key caches on the pointer. It holds its descriptors weakly: one that no
// stream table or consumer holds any more (a finished job's series, after
// the sender compacts its table) is forgotten after a collection, so
// churning label values do not grow it for ever, while a pointer anyone
// still holds stays the one lookup returns. Entries are keyed by a hash of
// the descriptor's key, checked against the descriptor on every hit: the
// key itself is not kept. It holds at most max entries; beyond that new
// descriptors are returned un-interned (and counted).
type Interner struct {
	mu    sync.Mutex
	seed  maphash.Seed
	m     map[uint64]weak.Pointer[metric.Desc]
	words map[string]string
	max   int
	// forgetFn is forget as a func value, made once: a method value
	// made per descriptor would allocate each time.
	forgetFn func(uint64)
	Misses   atomic.Uint64 // descriptors not interned: the interner was full, or (rarely) two keys' hashes met
}

// NewInterner holds up to max descriptors (<= 0: one million).
func NewInterner(max int) *Interner {
	if max <= 0 {
		max = 1 << 20
	}
	in := &Interner{seed: maphash.MakeSeed(), m: map[uint64]weak.Pointer[metric.Desc]{}, words: map[string]string{}, max: max}
	in.forgetFn = in.forget
	return in
}

// Len is the number of interned descriptors, counting those collected
// whose entries are not yet removed.
func (in *Interner) Len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.m)
}

// lookup returns the descriptor whose key (see Decoder.desc) is key.
func (in *Interner) lookup(key []byte) *metric.Desc {
	h := maphash.Bytes(in.seed, key)
	in.mu.Lock()
	defer in.mu.Unlock()
	w, ok := in.m[h]
	if ok {
		if d := w.Value(); d != nil {
			if keyMatches(d, key) {
				return d
			}
			// Another series with the same hash (the seed is random, so
			// a sender cannot aim for one): correct, only not shared.
			in.Misses.Add(1)
			return in.descFromKey(key)
		}
	}
	d := in.descFromKey(key)
	if !ok && len(in.m) >= in.max {
		in.Misses.Add(1)
		return d
	}
	in.m[h] = weak.Make(d)
	runtime.AddCleanup(d, in.forgetFn, h)
	return d
}

// forget removes h's entry once its descriptor is collected, unless a
// lookup has put a live one in its place since.
func (in *Interner) forget(h uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if w, ok := in.m[h]; ok && w.Value() == nil {
		delete(in.m, h)
	}
}

// keyMatches reports whether d is the descriptor key (see Decoder.desc)
// describes.
func keyMatches(d *metric.Desc, key []byte) bool {
	if len(key) == 0 || metric.Type(key[0]) != d.Type {
		return false
	}
	p := payloadReader{b: key[1:]}
	if string(p.str("name")) != d.Name || string(p.str("help")) != d.Help || p.uvarint("labels") != uint64(len(d.Labels)) {
		return false
	}
	for _, l := range d.Labels {
		if string(p.str("label name")) != l.Name || string(p.str("label value")) != l.Value {
			return false
		}
	}
	return p.err == nil && len(p.b) == 0
}

// Decoder holds the receiving side of one connection.
type Decoder struct {
	lim Limits
	in  *Interner
	// A stream is found by id in dense while ids stay near the number of
	// streams (an encoder numbers them from 0), else in sparse: a lookup
	// per tick without hashing, and no more memory than the streams'
	// count allows whatever ids a peer sends.
	dense    []*decStream
	sparse   map[uint64]*decStream
	nstreams int
	total    int // table entries over all streams
	key      []byte
	br       bitReader
	// vals holds a tick's values while the handler runs: one for all
	// streams, as thousands of them share a connection.
	vals []float64
	// Values counts decoded values, for throughput accounting.
	Values uint64
	// BadFrames counts values frames whose codes did not decode: each
	// costs its stream until its next keyframe, not the connection.
	BadFrames uint64
	badNode   string // the node of the last one
	// CheckRelayed: a relayed stream's value codes are checked before
	// they are passed on, and a frame that fails ends the connection.
	// Without it they are passed on as they came, and whoever decodes
	// them (the server) drops a bad one and asks for a keyframe; an
	// aggregator then reads no value codes.
	CheckRelayed bool
	// Now is when the frame being decoded was read, if the caller knows
	// (RelayFrame.Arrived).
	Now time.Time
	// keyReq are relayed streams whose keyframe the handler asked for,
	// to be requested from the sender.
	keyReq []uint64
	// What a RelayHandler is passed, reused: a tick allocates nothing.
	rf RelayFrame
	rs RelaySchema
	// Scratch: a relayed stream's runs while they are read, its order's
	// indexes while it is compacted.
	runs, used []int32
}

type decStream struct {
	node  string
	descs Table
	state []valState
	idx   []int32
	seq   []*metric.Desc
	prevT int64
	prevD int64
	ready bool // a schema has been received
	// check: the stream is relayed (RelayHandler), so its values are
	// passed on unread, or with CheckRelayed only checked, against chk
	// instead of state; its order is kept as runs ((start, length)
	// pairs, usually one) of n series rather than idx and seq.
	check bool
	chk   []chkState
	runs  []int32
	n     int
	// fresh: a reset schema arrived since the last values frame.
	fresh bool
	src   *RelaySource
	// keyAsked: a keyframe was requested and has not come yet.
	keyAsked bool
	// broken: a values frame did not decode, so the value state is lost
	// until a keyframe or a reset schema; the ticks lost meanwhile are
	// stamped lostFrom through lostTo.
	broken           bool
	lostFrom, lostTo time.Time
}

// NewDecoder returns a decoder bounded by lim, interning descriptors in in
// (nil: a private interner).
func NewDecoder(lim Limits, in *Interner) *Decoder {
	if in == nil {
		in = NewInterner(0)
	}
	return &Decoder{lim: lim.withDefaults(), in: in, sparse: map[uint64]*decStream{}}
}

// stream returns the stream with id, nil if there is none.
func (d *Decoder) stream(id uint64) *decStream {
	if id < uint64(len(d.dense)) {
		return d.dense[id]
	}
	return d.sparse[id]
}

// addStream records a new stream with id.
func (d *Decoder) addStream(id uint64, s *decStream) {
	d.nstreams++
	if id >= uint64(2*d.nstreams+64) {
		d.sparse[id] = s
		return
	}
	for uint64(len(d.dense)) <= id {
		// Ids below id taken by sparse move over, so lookups stay
		// in one place.
		k := uint64(len(d.dense))
		d.dense = append(d.dense, d.sparse[k])
		delete(d.sparse, k)
	}
	d.dense[id] = s
}

// Decode handles one data frame (schema, values, gap, node state, ping),
// calling h. An error means the peer is broken or hostile: drop the
// connection.
func (d *Decoder) Decode(typ byte, payload []byte, h Handler) error {
	switch typ {
	case frameSchema:
		return d.schema(payload, h)
	case frameValues:
		return d.values(payload, h, false)
	case frameValues | frameKey:
		return d.values(payload, h, true)
	case frameGap:
		p := payloadReader{b: payload}
		node := p.str("gap node")
		from := p.varint("gap from")
		to := p.varint("gap to")
		if err := p.end("gap"); err != nil {
			return err
		}
		h.Gap(string(node), time.Unix(0, from), time.Unix(0, to))
		return nil
	case frameNodeState:
		p := payloadReader{b: payload}
		node := p.str("node state node")
		up := p.byte1("node state")
		t := p.varint("node state time")
		if err := p.end("node state"); err != nil {
			return err
		}
		if up > 1 {
			return fmt.Errorf("%w: node state %d", ErrMalformed, up)
		}
		h.NodeState(string(node), up == 1, time.Unix(0, t))
		return nil
	case frameIORecords:
		return d.ioRecords(payload, h)
	case framePing:
		return nil
	}
	return fmt.Errorf("%w %d", ErrUnknownFrame, typ)
}

func (p *payloadReader) end(what string) error {
	if p.err == nil && len(p.b) != 0 {
		p.fail(fmt.Sprintf("%d trailing bytes in %s", len(p.b), what))
	}
	return p.err
}

func (d *Decoder) schema(payload []byte, h Handler) error {
	p := payloadReader{b: payload}
	id := p.uvarint("stream id")
	flags := p.byte1("schema flags")
	node := p.str("node")
	// Copied runs take a few bytes for many entries, so the count is
	// bounded by the table limit below rather than by the frame's size.
	nNew64 := p.uvarint("new descriptors")
	if p.err != nil {
		return p.err
	}
	if nNew64 > uint64(2*d.lim.MaxSeries) {
		return fmt.Errorf("%w: %d new descriptors", ErrLimit, nNew64)
	}
	nNew := int(nNew64)
	if len(node) == 0 {
		return fmt.Errorf("%w: empty node name", ErrMalformed)
	}
	s := d.stream(id)
	if s == nil {
		if d.nstreams >= d.lim.MaxStreams {
			return fmt.Errorf("%w: more than %d streams", ErrLimit, d.lim.MaxStreams)
		}
		if flags&schemaReset == 0 {
			return fmt.Errorf("%w: first schema of stream %d is not a reset", ErrMalformed, id)
		}
		_, relay := h.(RelayHandler)
		s = &decStream{check: relay}
		if relay {
			s.src = &RelaySource{}
		}
		d.addStream(id, s)
	}
	if s.node != string(node) {
		s.node = string(node)
	}
	if flags&^(schemaReset|schemaCompact) != 0 {
		return fmt.Errorf("%w: schema flags %#x", ErrMalformed, flags)
	}
	// A table is shared with the relay (RelaySchema) and in part with
	// other streams' tables (Table), so it is never changed in place:
	// reset and compaction make new arrays; appends go past the length
	// any relay saw.
	if flags&schemaReset != 0 {
		d.total -= s.descs.Len()
		s.descs, s.state, s.chk = Table{}, s.state[:0], s.chk[:0]
		s.prevT, s.prevD = 0, 0
	} else if flags&schemaCompact != 0 {
		d.total -= s.descs.Len()
		if s.check {
			d.used = expandRuns(d.used[:0], s.runs)
			s.descs, s.chk = compactTable(s.descs, s.chk, d.used)
		} else {
			s.descs, s.state = compactTable(s.descs, s.state, s.idx)
		}
		d.total += s.descs.Len()
	}
	if s.descs.Len()+nNew > 2*d.lim.MaxSeries || d.total+nNew > d.lim.MaxTotalSeries {
		return fmt.Errorf("%w: descriptor table of node %s", ErrLimit, s.node)
	}
	if s.check {
		if d.CheckRelayed {
			s.chk = grow(s.chk, nNew)
		}
	} else {
		s.state = grow(s.state, nNew)
	}
	var prev *metric.Desc
	for added := 0; added < nNew; {
		if len(p.b) > 0 && p.b[0] == descCopy {
			p.b = p.b[1:]
			src := d.stream(p.uvarint("copy stream"))
			start := p.uvarint("copy start")
			n := p.uvarint("copy count")
			if p.err != nil {
				return p.err
			}
			if src == nil || n == 0 || n > uint64(nNew-added) || start > uint64(src.descs.Len()) || n > uint64(src.descs.Len())-start {
				return fmt.Errorf("%w: copy of %d descriptors from %d of an unknown or shorter table", ErrMalformed, n, start)
			}
			s.descs.copyFrom(src.descs, int(start), int(n))
			prev = s.descs.At(s.descs.Len() - 1)
			d.total += int(n)
			added += int(n)
			continue
		}
		ds := d.desc(&p, prev, s.descs)
		if ds == nil {
			return p.err
		}
		// A server holds thousands of streams: no append doubling. (A
		// copied run may share its source's array instead: room is made
		// as entries are spelled out.)
		if cap(s.descs.own) == len(s.descs.own) {
			s.descs.reserve(nNew - added)
		}
		s.descs.add(ds)
		d.total++
		added++
		prev = ds
	}
	// New entries start from the initial state.
	if s.check {
		for d.CheckRelayed && len(s.chk) < s.descs.Len() {
			s.chk = append(s.chk, 0)
		}
	} else {
		for len(s.state) < s.descs.Len() {
			s.state = append(s.state, valState{})
		}
	}
	n := p.uvarint("series")
	if p.err != nil {
		return p.err
	}
	if n > uint64(d.lim.MaxSeries) {
		return fmt.Errorf("%w: %d series > %d", ErrLimit, n, d.lim.MaxSeries)
	}
	if s.check {
		d.runs = d.runs[:0]
	} else {
		s.idx, s.seq = grow(s.idx[:0], int(n)), grow(s.seq[:0], int(n))
	}
	next := int64(0)
	for count := uint64(0); count < n; {
		start := next + p.varint("run start")
		length := p.uvarint("run length")
		if p.err != nil {
			return p.err
		}
		if length == 0 || length > n-count || start < 0 || start > int64(s.descs.Len()) ||
			start+int64(length) > int64(s.descs.Len()) {
			return fmt.Errorf("%w: run of %d series from %d in a table of %d", ErrMalformed, length, start, s.descs.Len())
		}
		if s.check {
			d.runs = append(d.runs, int32(start), int32(length))
		} else {
			for i := start; i < start+int64(length); i++ {
				s.idx = append(s.idx, int32(i))
				s.seq = append(s.seq, s.descs.At(int(i)))
			}
		}
		count += length
		next = start + int64(length)
	}
	if s.check {
		// Sized exactly: thousands of streams, one run each, usually.
		if cap(s.runs) < len(d.runs) {
			s.runs = make([]int32, 0, len(d.runs))
		}
		s.runs, s.n = append(s.runs[:0], d.runs...), int(n)
	}
	if err := p.end("schema"); err != nil {
		return err
	}
	s.ready = true
	if flags&schemaReset != 0 {
		s.fresh = true
	}
	if s.check {
		r, ok := h.(RelayHandler)
		if !ok {
			return errNotRelay
		}
		d.rs = RelaySchema{Source: s.src, Reset: flags&schemaReset != 0, Compact: flags&schemaCompact != 0,
			Table: s.descs, Added: nNew, Runs: s.runs}
		r.RelaySchema(s.node, &d.rs)
		d.rs = RelaySchema{} // keep nothing alive
		return nil
	}
	h.Schema(s.node, s.seq)
	return nil
}

// errNotRelay: a stream begun for a RelayHandler keeps no value state, so
// only a RelayHandler can take its frames.
var errNotRelay = errors.New("wire: a relayed stream's frames decoded for a handler that does not relay")

// desc reads one descriptor and interns it; nil on error (in p.err).
func (d *Decoder) desc(p *payloadReader, prev *metric.Desc, table Table) *metric.Desc {
	flags := p.byte1("descriptor flags")
	typ := p.byte1("descriptor type")
	if p.err != nil {
		return nil
	}
	if (flags != descLike && flags&^(descSameName|descSameHelp|descSameLabelNames) != 0) || typ > byte(metric.Untyped) {
		p.fail(fmt.Sprintf("descriptor flags %#x type %d", flags, typ))
		return nil
	}
	if flags == descLike {
		k := p.uvarint("descriptor reference")
		if p.err != nil {
			return nil
		}
		if k >= uint64(table.Len()) {
			p.fail(fmt.Sprintf("descriptor reference %d in a table of %d", k, table.Len()))
			return nil
		}
		prev, flags = table.At(int(k)), descSameName|descSameHelp|descSameLabelNames
	}
	if prev == nil && flags != 0 {
		p.fail("descriptor refers to a missing predecessor")
		return nil
	}
	// The descriptor is read straight into its interning key (type, then
	// length-prefixed name, help, label count and pairs); only a new
	// series allocates, when the interner builds it from the key.
	k := append(d.key[:0], typ)
	if flags&descSameName != 0 {
		k = appendString(k, prev.Name)
	} else {
		name := p.str("name")
		if p.err == nil && len(name) == 0 {
			p.fail("empty metric name")
		}
		k = appendBytes(k, name)
	}
	if flags&descSameHelp != 0 {
		k = appendString(k, prev.Help)
	} else {
		k = appendBytes(k, p.str("help"))
	}
	var nl int
	if flags&descSameLabelNames != 0 {
		nl = len(prev.Labels)
	} else {
		nl = p.count("labels", 256)
	}
	k = binary.AppendUvarint(k, uint64(nl))
	for i := range nl {
		if flags&descSameLabelNames != 0 {
			k = appendString(k, prev.Labels[i].Name)
		} else {
			k = appendBytes(k, p.str("label name"))
		}
		k = appendBytes(k, p.str("label value"))
	}
	d.key = k
	if p.err != nil {
		return nil
	}
	return d.in.lookup(k)
}

// descFromKey builds a descriptor from a key written by Decoder.desc.
func (in *Interner) descFromKey(k []byte) *metric.Desc {
	p := payloadReader{b: k[1:]}
	ds := &metric.Desc{Type: metric.Type(k[0])}
	// Thousands of descriptors share a name, a help text and label names:
	// one copy of each. Label values are copied, as job ids churn.
	ds.Name = in.word(p.str("name"))
	ds.Help = in.word(p.str("help"))
	if n := p.uvarint("labels"); n > 0 {
		ds.Labels = make([]metric.Label, n)
		for i := range ds.Labels {
			ds.Labels[i].Name = in.word(p.str("label name"))
			ds.Labels[i].Value = string(p.str("label value"))
		}
	}
	return ds
}

// maxWords bounds the names and help texts an Interner shares; beyond it
// they are copied.
const maxWords = 1 << 16

// word returns b as a string shared by every descriptor that has it as
// name, help or label name. Called with in.mu held.
func (in *Interner) word(b []byte) string {
	if w, ok := in.words[string(b)]; ok {
		return w
	}
	w := string(b)
	if len(in.words) < maxWords {
		in.words[w] = w
	}
	return w
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func (d *Decoder) values(payload []byte, h Handler, key bool) error {
	p := payloadReader{b: payload}
	id := p.uvarint("stream id")
	body := p.b
	dod := p.varint("time")
	n := p.uvarint("value count")
	if p.err != nil {
		return p.err
	}
	s := d.stream(id)
	if s == nil || !s.ready {
		return fmt.Errorf("%w: values for stream %d before its schema", ErrMalformed, id)
	}
	if series := len(s.idx) + s.n; n != uint64(series) { // one of them is 0
		return fmt.Errorf("%w: node %s: %d values for %d series", ErrMalformed, s.node, n, series)
	}
	if key {
		clear(s.state)
		clear(s.chk)
		s.prevT, s.prevD = 0, 0
	}
	s.prevD += dod
	s.prevT += s.prevD
	if s.check {
		r, ok := h.(RelayHandler)
		if !ok {
			return errNotRelay
		}
		if d.CheckRelayed && !checkCodes(p.b, s.runs, s.chk) {
			return fmt.Errorf("%w: node %s: bad value codes", ErrMalformed, s.node)
		}
		d.Values += n
		f := &d.rf
		*f = RelayFrame{Source: s.src, Key: key || s.fresh, Body: body, N: int(n), Table: s.descs, Runs: s.runs, Arrived: d.Now}
		s.fresh = false
		if f.Key {
			s.keyAsked = false
		}
		r.RelayTick(s.node, time.Unix(0, s.prevT), f)
		if f.WantKey && !f.Key && !s.keyAsked {
			s.keyAsked = true
			d.keyReq = append(d.keyReq, id)
		}
		*f = RelayFrame{} // keep nothing alive
		return nil
	}
	t := time.Unix(0, s.prevT)
	if key || s.fresh {
		if s.broken && s.lostTo.After(s.lostFrom) {
			h.Gap(s.node, s.lostFrom, s.lostTo) // the whole loss, once
		}
		s.broken, s.keyAsked, s.fresh = false, false, false
	} else if s.broken {
		d.badFrame(s, id, t, h)
		return nil
	}
	d.br = bitReader{buf: p.b}
	vals := d.vals[:0]
	for _, i := range s.idx {
		v, ok := decodeValue(&d.br, &s.state[i])
		if !ok {
			d.BadFrames++
			d.badFrame(s, id, t, h)
			return nil
		}
		vals = append(vals, v)
	}
	if d.br.pos != len(d.br.buf) {
		d.BadFrames++
		d.badFrame(s, id, t, h)
		return nil
	}
	d.vals = vals
	d.Values += uint64(len(vals))
	h.Tick(s.node, t, s.seq, vals)
	return nil
}

// badFrame drops a values frame of s stamped t that did not decode, or
// came while s waits for a keyframe after one that did not. Only s pays:
// relaying aggregators pass value codes on unchecked, so one node's bad
// frame reaches the server on a connection carrying thousands of others.
// The first lost tick is a gap at once (the node's series go stale there),
// the whole loss another when the stream resumes; the sender is asked for
// a keyframe once.
func (d *Decoder) badFrame(s *decStream, id uint64, t time.Time, h Handler) {
	if !s.broken {
		s.broken, s.lostFrom, d.badNode = true, t, s.node
		h.Gap(s.node, t, t)
	}
	s.lostTo = t
	if !s.keyAsked {
		s.keyAsked = true
		d.keyReq = append(d.keyReq, id)
	}
}
