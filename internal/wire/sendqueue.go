package wire

import (
	"cmp"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// sendQueue holds a Client's ticks from the tick that encoded them until
// the upstream acknowledges them: a bounded FIFO of frames waiting for a
// connection (the oldest ticks dropped when full), the frames being
// written, and the written ones not yet acknowledged. With each tick it
// keeps its values, so that after a lost connection the ticks the
// upstream may not have are encoded again for the next one (resend):
// only what its bounds drop is lost, and accounted as a gap of its
// stream. It is guarded by the Client's lock, since encoding and queueing
// go together.
type sendQueue struct {
	// max bounds the bytes of queued frames plus their kept values, and
	// separately the kept values of ticks written but not acknowledged.
	max   int
	stats *ClientStats

	q     []entry // FIFO from head, ascending seq
	head  int
	bytes int
	seq   uint64 // last entry sequence number given out
	cur   int    // index in q: no entry between head and cur holds a tick
	ndead int    // dropped entries still in q
	free  [][]byte
	// freeMax bounds free (notePeak); qpeak is the most entries queued
	// at once in the current window of pushes.
	freeMax, qpeak int
	pushes         uint64
	avgLen         int // moving average of queued frame sizes
	// freeVals are value buffers of acknowledged or dropped ticks.
	freeVals [][]float64
	// dirty: frames of the encoder's current epoch went to a connection
	// that may have lost them, so the next connection must start over.
	dirty    bool
	inflight []entry
	// unacked are written ticks the upstream has not yet acknowledged as
	// processed; if the connection dies they are reported as gaps, since
	// they may have died in the peer's socket buffer (kill -9).
	unacked []entry
	uhead   int
	upeak   int // most entries unacked at once since the queue last emptied
	// unackedBytes are the values kept for unacked, bounded by max; the
	// entries before index ukeep keep none.
	unackedBytes int
	ukeep        int
	// conn numbers connections, so a late ack of an old one is ignored;
	// ackedTo is the current one's highest ack, which can overtake the
	// bookkeeping of the write it acknowledges.
	conn, ackedTo uint64
	// hold: ticks stamped after released wait in q (ClientOptions.Hold).
	hold     bool
	released time.Time
	// recBytes are the frames of per-file I/O records queued or kept
	// unacknowledged (bounded to max/4 by Client.pushRecords).
	recBytes int
}

type entry struct {
	buf []byte
	cs  *ClientStream // nil for node-level frames
	t   time.Time
	gap gapRange // a gap of cs written ahead of the tick when it was sent
	end uint64   // connection byte offset just past this entry, once written
	seq uint64
	// next is the seq of cs's next queued entry (0: none yet), so the
	// ticks a drop invalidates are found without scanning the queue.
	next     uint64
	valuesAt int  // buf holds [Schema]Values; where Values starts
	tick     bool // buf still carries the tick (false: dropped, schema kept)
	key      bool // the values decode without cs's earlier values
	dead     bool // dropped altogether; skipped by collect
	again    bool // queued again after a reconnect (counted once)
	// queued is when the entry was first queued; a caller may give it
	// (the time its frame arrived) to save a clock read.
	queued time.Time
	// The tick itself, to encode it again after a reconnect: the
	// stream's order (shared by its ticks, never changed) and values
	// (owned). vals is nil for relayed ticks and once dropped.
	descs []*metric.Desc
	vals  []float64
	// rec: a node-level frame of nrec per-file I/O records, kept (buf)
	// until acknowledged like a tick, and sent again as it is.
	rec  bool
	nrec int
}

// valBytes is the memory e's kept values count against the bound.
func (e *entry) valBytes() int { return 8 * len(e.vals) }

// keptBytes is the memory e keeps for a resend once written.
func (e *entry) keptBytes() int {
	if e.rec {
		return len(e.buf)
	}
	return e.valBytes()
}

// maxUnacked bounds the written-but-unacknowledged entries kept; past it
// the oldest are assumed delivered (an upstream that never acknowledges).
const maxUnacked = 1 << 17

type gapRange struct {
	set      bool
	from, to time.Time
}

// lose records that e's tick (and any gap it carried) never arrived.
func (e *entry) lose() {
	if e.cs == nil {
		return
	}
	if e.gap.set {
		e.cs.noteGap(e.gap.from)
		e.cs.noteGap(e.gap.to)
	}
	if e.tick {
		e.cs.noteGap(e.t)
	}
}

// take returns a buffer for one tick (or node-level frame), first dropping
// the oldest queued ticks while the queue is full. Dropping happens before
// encoding, so the encoder knows which streams need a keyframe or a reset
// schema.
func (q *sendQueue) take() []byte {
	for q.bytes >= q.max && q.dropOldest() {
	}
	var buf []byte
	if n := len(q.free); n > 0 {
		buf, q.free = q.free[n-1][:0], q.free[:n-1]
		if q.outsized(buf) { // kept when frames were bigger
			buf = nil
		}
	}
	return buf
}

// release takes back a buffer take gave out that was not pushed.
func (q *sendQueue) release(buf []byte) { q.putBuf(buf) }

// The frame buffers kept for reuse are as many as were queued at once
// lately (twice the most over the last freeWindow pushes, and at least
// minFree): an aggregator queues a few thousand relayed frames as its
// children's ticks come in, and reusing their buffers saves allocating
// each; a burst long past (the upstream away at start-up) would otherwise
// leave its buffers kept for good, several hundred bytes each.
const (
	freeWindow = 1 << 16
	minFree    = 256
)

// putBuf keeps buf for reuse unless enough are kept or it is outsized.
func (q *sendQueue) putBuf(buf []byte) {
	if len(q.free) < max(q.freeMax, minFree) && !q.outsized(buf) {
		q.free = append(q.free, buf[:0])
	}
}

// outsized reports whether buf was grown by a one-off big frame (a full
// schema after connecting): let go rather than kept for small ticks.
func (q *sendQueue) outsized(buf []byte) bool { return cap(buf) > 4*q.avgLen+4096 }

// notePeak tracks the entries queued at once and, once a window, sizes
// the buffers kept for reuse by it.
func (q *sendQueue) notePeak() {
	q.qpeak = max(q.qpeak, len(q.q)-q.head)
	if q.pushes++; q.pushes%freeWindow != 0 {
		return
	}
	q.freeMax, q.qpeak = 2*q.qpeak, 0
	if n := max(q.freeMax, minFree); len(q.free) > n {
		clear(q.free[n:])
		q.free = q.free[:n]
	}
}

// keep returns a copy of values for an entry, in a reused buffer.
func (q *sendQueue) keep(values []float64) []float64 {
	var v []float64
	if n := len(q.freeVals); n > 0 {
		v, q.freeVals = q.freeVals[n-1], q.freeVals[:n-1]
		if cap(v) > 2*len(values)+64 { // a one-off big tick's buffer
			v = nil
		}
	}
	return append(v[:0], values...)
}

// forget lets go of e's kept values: it can no longer be sent again.
func (q *sendQueue) forget(e *entry) {
	if e.rec && e.buf != nil {
		q.recBytes -= len(e.buf)
		q.putBuf(e.buf)
		e.buf = nil
	}
	if e.vals != nil && len(q.freeVals) < max(q.freeMax, minFree) {
		q.freeVals = append(q.freeVals, e.vals[:0])
	}
	e.vals, e.descs = nil, nil
}

// push queues e, whose buf came from take.
func (q *sendQueue) push(e entry) {
	if len(q.q) == cap(q.q) && q.head > 0 {
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.cur = max(q.cur-q.head, 0)
		q.q, q.head = q.q[:n], 0
	}
	q.seq++
	e.seq = q.seq
	q.notePeak()
	if e.cs != nil {
		e.tick = e.cs.s.valuesAt < len(e.buf) || e.vals != nil // a relayed schema comes alone
	}
	if !e.again {
		if e.queued.IsZero() {
			e.queued = time.Now()
		}
		if e.tick || e.cs == nil && !e.rec {
			q.stats.Ticks.Add(1)
		}
	}
	if e.cs != nil {
		e.valuesAt, e.key = e.cs.s.valuesAt, e.cs.s.key
		if p := q.find(e.cs.last); p != nil {
			p.next = e.seq
		}
		e.cs.last = e.seq
	}
	q.q = append(q.q, e)
	q.bytes += len(e.buf) + e.valBytes()
	q.avgLen += (len(e.buf) - q.avgLen) / 8
}

// waiting is how many frames are queued and not yet collected.
func (q *sendQueue) waiting() int { return len(q.q) - q.head }

// collect moves queued frames, up to about max bytes, into w; they are in
// flight until written.
func (q *sendQueue) collect(w []byte, max int) []byte {
	for q.head < len(q.q) && (len(w) == 0 || len(w)+len(q.q[q.head].buf) <= max) {
		if e := &q.q[q.head]; q.hold && !e.dead && e.cs != nil && e.t.After(q.released) {
			break // held: not yet due, and nothing overtakes it
		}
		e := q.q[q.head]
		q.q[q.head] = entry{}
		q.head++
		if e.dead {
			q.ndead--
			continue
		}
		// A stream's gap goes out just before its next tick: older ticks
		// can no longer be dropped then, so one Gap covers them exactly.
		if cs := e.cs; e.tick && cs.gap {
			w = AppendGap(w, cs.s.node, cs.gapFrom, cs.gapTo)
			e.gap = gapRange{true, cs.gapFrom, cs.gapTo}
			cs.gap = false
		}
		w = append(w, e.buf...)
		q.bytes -= len(e.buf) + e.valBytes()
		if !e.rec { // records keep their frame to send it again
			q.putBuf(e.buf)
			e.buf = nil
		}
		q.inflight = append(q.inflight, e)
		q.dirty = true
	}
	if q.head == len(q.q) {
		q.q, q.head, q.cur = q.q[:0], 0, 0
	}
	return w
}

// written does the bookkeeping of the frames in flight once their write
// returned: their ticks wait for the acknowledgement of connection offset
// written, or with err, which ends the connection, for lost: they may or
// may not have arrived. onWritten, if set, is called for each tick
// written.
func (q *sendQueue) written(err error, written uint64, onWritten func(t, queued, now time.Time)) {
	var now time.Time
	if onWritten != nil && err == nil {
		now = time.Now()
	}
	for _, e := range q.inflight {
		if !e.tick && !e.rec {
			continue
		}
		if onWritten != nil && err == nil && e.tick {
			onWritten(e.t, e.queued, now)
		}
		if len(q.unacked)-q.uhead >= maxUnacked {
			// Assumed delivered: an upstream that never acknowledges.
			q.unackedBytes -= q.unacked[q.uhead].keptBytes()
			q.forget(&q.unacked[q.uhead])
			q.unacked[q.uhead] = entry{}
			q.uhead++
		}
		if len(q.unacked) == cap(q.unacked) && q.uhead > 0 {
			k := copy(q.unacked, q.unacked[q.uhead:])
			clear(q.unacked[k:])
			q.ukeep = max(q.ukeep-q.uhead, 0)
			q.unacked, q.uhead = q.unacked[:k], 0
		}
		e.end = written
		if err != nil {
			e.end = ^uint64(0) // never acknowledged
		} else if e.end <= q.ackedTo {
			q.forget(&e)
			continue // the ack came before this bookkeeping
		}
		q.unacked = append(q.unacked, e)
		q.upeak = max(q.upeak, len(q.unacked)-q.uhead)
		q.unackedBytes += e.keptBytes()
	}
	clear(q.inflight)
	q.inflight = q.inflight[:0]
	// Past the bound, the oldest unacknowledged ticks keep no values: if
	// the connection is lost they cannot be sent again and become gaps.
	for q.unackedBytes > q.max {
		q.ukeep = max(q.ukeep, q.uhead)
		e := &q.unacked[q.ukeep]
		q.unackedBytes -= e.keptBytes()
		q.forget(e)
		q.ukeep++
	}
}

// connected starts the acknowledgement count of a new connection and
// returns its number for acked.
func (q *sendQueue) connected() uint64 {
	q.conn++
	q.ackedTo = 0
	return q.conn
}

// find returns the queued entry with sequence number seq, or nil.
func (q *sendQueue) find(seq uint64) *entry {
	qs := q.q[q.head:]
	// Mostly a stream's previous tick went out long ago.
	if len(qs) == 0 || seq == 0 || seq < qs[0].seq || seq > qs[len(qs)-1].seq {
		return nil
	}
	// Sequence numbers run without holes until a compaction takes dead
	// entries out: then the guess misses and the search finds it.
	if d := seq - qs[0].seq; d < uint64(len(qs)) && qs[d].seq == seq {
		return &qs[d]
	}
	i, ok := slices.BinarySearchFunc(qs, seq, func(e entry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if !ok || seq == 0 {
		return nil
	}
	return &qs[i]
}

// dropOldest drops the oldest queued tick, and with it the later queued
// ticks of its stream up to the stream's next keyframe: they are coded
// against the dropped one. Their schema frames stay queued, so the
// stream's table stays in step with the receiver's. If no keyframe
// follows, the stream's next tick is encoded as one. Only when no tick is
// left does it drop kept schemas (dropPinned). It reports false when the
// queue is empty.
func (q *sendQueue) dropOldest() bool {
	q.cur = max(q.cur, q.head)
	for q.cur < len(q.q) && !q.q[q.cur].tick {
		q.cur++
	}
	if q.cur == len(q.q) {
		return q.dropPinned()
	}
	e := &q.q[q.cur]
	cs := e.cs
	next := e.next
	q.strip(e)
	for {
		f := q.find(next)
		if f == nil {
			cs.s.Keyframe()
			cs.inSync = false // a relayed stream waits for its sender's keyframe
			break
		}
		if f.key && f.tick {
			break
		}
		next = f.next
		if f.tick {
			q.strip(f)
		}
	}
	q.reclaim()
	return true
}

// strip drops e's tick, keeping its schema frame if it has one.
func (q *sendQueue) strip(e *entry) {
	e.lose()
	q.stats.Dropped.Add(1)
	q.bytes -= e.valBytes()
	q.forget(e)
	n := e.valuesAt
	if n == 0 {
		q.kill(e)
		return
	}
	q.bytes -= len(e.buf) - n
	e.buf = e.buf[:n]
	e.tick = false
}

// kill removes e from the queue (it stays as a tombstone until reclaimed).
func (q *sendQueue) kill(e *entry) {
	q.bytes -= len(e.buf) + e.valBytes()
	q.forget(e)
	q.putBuf(e.buf)
	*e = entry{seq: e.seq, next: e.next, dead: true}
	q.ndead++
}

// reclaim lets go of tombstones: at the head at once, elsewhere when they
// are many (the head may be a kept schema for as long as upstream is down).
func (q *sendQueue) reclaim() {
	for q.head < len(q.q) && q.q[q.head].dead {
		q.q[q.head] = entry{}
		q.head++
		q.ndead--
	}
	if q.ndead > 64 && 2*q.ndead > len(q.q)-q.head {
		n := 0
		for i := q.head; i < len(q.q); i++ {
			if !q.q[i].dead {
				q.q[n] = q.q[i]
				n++
			}
		}
		clear(q.q[n:])
		q.q, q.head, q.cur, q.ndead = q.q[:n], 0, 0, 0
	}
}

// dropPinned runs when the queue holds no tick, only schema frames kept for
// later ticks and node-level frames, yet is full (say, series churn while
// upstream is down for long). It drops all queued frames of the stream
// with the oldest of them, which then starts over with a reset schema;
// if another queued schema copies descriptors from that stream, every
// stream's frames go. Node-level frames go last, oldest first.
func (q *sendQueue) dropPinned() bool {
	first := uint64(0)
	var cs *ClientStream
	for i := q.head; i < len(q.q); i++ {
		if e := &q.q[i]; !e.dead {
			if first == 0 {
				first = e.seq
			}
			if e.cs != nil {
				cs = e.cs
				break
			}
		}
	}
	if first == 0 {
		return false
	}
	if cs == nil {
		for i := q.head; i < len(q.q); i++ {
			if e := &q.q[i]; !e.dead {
				if e.rec {
					q.stats.DroppedIORecords.Add(uint64(e.nrec))
				} else {
					q.stats.DroppedEvents.Add(1)
				}
				q.kill(e)
				break
			}
		}
		q.reclaim()
		return true
	}
	all := cs.s.lastCopy >= first
	for i := q.head; i < len(q.q); i++ {
		e := &q.q[i]
		if e.dead || e.cs == nil || (!all && e.cs != cs) {
			continue
		}
		// No tick is queued (dropOldest came first): nothing to count.
		e.cs.s.epoch = 0 // the receiver's table is not ours any more: reset
		q.kill(e)
	}
	q.reclaim()
	return true
}

// acked drops the unacknowledged entries the upstream has processed:
// those ending at or before byte offset n of connection conn.
func (q *sendQueue) acked(conn, n uint64) {
	if conn != q.conn {
		return
	}
	q.ackedTo = max(q.ackedTo, n)
	for q.uhead < len(q.unacked) && q.unacked[q.uhead].end <= n {
		q.unackedBytes -= q.unacked[q.uhead].keptBytes()
		q.forget(&q.unacked[q.uhead])
		q.unacked[q.uhead] = entry{}
		q.uhead++
	}
	if q.uhead == len(q.unacked) {
		q.unacked, q.uhead, q.ukeep = q.unacked[:0], 0, 0
		// Sized for what waited lately, not for a burst long past (a
		// slow upstream at start-up): an entry is a few hundred bytes.
		if cap(q.unacked) > 4*q.upeak+1024 {
			q.unacked = make([]entry, 0, 2*q.upeak)
		}
		q.upeak = 0
	}
}

// lost runs after a connection ends. The upstream may lack the ticks
// written but not acknowledged (they may have died in its socket buffer,
// or with it), and the queued frames continue a stream state a new
// upstream never saw. If any frame of the encoder's epoch went out
// (reset), lost empties the queue and returns, oldest first, the ticks to
// encode again from their kept values and the node-level frames, which
// stand alone, for the Client to queue again after resetting its encoder.
// A tick without values (relayed, or past the bound) is lost: a gap.
func (q *sendQueue) lost(again []entry) (_ []entry, reset bool) {
	if !q.dirty {
		return again, false
	}
	q.dirty = false
	take := func(e entry) {
		switch {
		case e.dead:
		case e.rec && e.buf == nil: // past the bound: lost
			q.stats.DroppedIORecords.Add(uint64(e.nrec))
		case e.cs == nil:
			e.again = true
			again = append(again, e) // node-level: its frame as it is
		case !e.tick:
			// A schema kept for dropped ticks: the ticks sent again
			// carry their own.
			q.putBuf(e.buf)
		case e.vals == nil:
			e.lose()
			q.stats.Dropped.Add(1)
			if e.buf != nil {
				q.putBuf(e.buf)
			}
		default:
			if e.gap.set { // written ahead of it: goes again
				e.cs.noteGap(e.gap.from)
				e.cs.noteGap(e.gap.to)
			}
			if e.buf != nil {
				q.putBuf(e.buf)
			}
			again = append(again, entry{cs: e.cs, t: e.t, queued: e.queued, again: true, descs: e.descs, vals: e.vals})
		}
	}
	for _, e := range q.unacked[q.uhead:] {
		take(e)
	}
	clear(q.unacked)
	q.unacked, q.uhead, q.ukeep, q.unackedBytes = q.unacked[:0], 0, 0, 0
	for _, e := range q.q[q.head:] {
		take(e)
	}
	clear(q.q)
	q.q, q.head, q.bytes, q.cur, q.ndead = q.q[:0], 0, 0, 0, 0
	return again, true
}

// deliveredBefore returns the queue time of the oldest tick not yet
// acknowledged or dropped, or now when there is none.
func (q *sendQueue) deliveredBefore() time.Time {
	for i := q.uhead; i < len(q.unacked); i++ {
		if q.unacked[i].cs != nil || q.unacked[i].rec {
			return q.unacked[i].queued
		}
	}
	for i := range q.inflight {
		if q.inflight[i].cs != nil || q.inflight[i].rec {
			return q.inflight[i].queued
		}
	}
	for i := q.head; i < len(q.q); i++ {
		if e := &q.q[i]; (e.cs != nil && e.tick || e.rec) && !e.dead {
			return e.queued
		}
	}
	return time.Now()
}

// dropOldestRecords drops the oldest record frame kept for a resend or
// queued, counting its records; false when there is none.
func (q *sendQueue) dropOldestRecords() bool {
	for i := q.uhead; i < len(q.unacked); i++ {
		if e := &q.unacked[i]; e.rec && e.buf != nil {
			q.stats.DroppedIORecords.Add(uint64(e.nrec))
			q.unackedBytes -= e.keptBytes()
			q.forget(e)
			e.nrec = 0 // counted: lost() must not count it again
			return true
		}
	}
	for i := q.head; i < len(q.q); i++ {
		if e := &q.q[i]; e.rec && !e.dead {
			q.stats.DroppedIORecords.Add(uint64(e.nrec))
			q.kill(e)
			q.reclaim()
			return true
		}
	}
	return false
}
