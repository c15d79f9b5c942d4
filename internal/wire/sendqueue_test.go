package wire

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func newTestQueue(max int) *sendQueue { return &sendQueue{max: max, stats: &ClientStats{}} }

// pushTick queues a tick of cs at second i whose frame is n bytes; every
// tick is a keyframe, so a drop takes only itself.
func pushTick(q *sendQueue, cs *ClientStream, i, n int) {
	buf := q.take()
	for range n {
		buf = append(buf, byte(i))
	}
	cs.s.valuesAt, cs.s.key = 0, true
	q.push(entry{buf: buf, cs: cs, t: time.Unix(int64(i), 0)})
}

// The queue keeps frames in order and within its bound, dropping the
// oldest tick first and accounting it as a gap of its stream.
func TestSendQueueBoundDropsOldest(t *testing.T) {
	q := newTestQueue(100)
	cs := &ClientStream{s: &Stream{node: "cn01"}}
	for i := range 15 {
		pushTick(q, cs, i, 10)
	}
	// Full at 100 bytes: each later tick first dropped the oldest.
	if q.bytes > 100 || q.stats.Dropped.Load() != 5 || q.stats.Ticks.Load() != 15 {
		t.Fatalf("%d bytes queued, %d dropped of %d", q.bytes, q.stats.Dropped.Load(), q.stats.Ticks.Load())
	}
	if !cs.gap || cs.gapFrom != time.Unix(0, 0) || cs.gapTo != time.Unix(4, 0) {
		t.Fatalf("gap %v %v..%v, want ticks 0..4", cs.gap, cs.gapFrom.Unix(), cs.gapTo.Unix())
	}
	w := q.collect(nil, 1<<20)
	// The gap goes out ahead of the first kept tick, then ticks 5..14.
	gap := AppendGap(nil, "cn01", time.Unix(0, 0), time.Unix(4, 0))
	if string(w[:len(gap)]) != string(gap) || len(w) != len(gap)+100 || w[len(gap)] != 5 || w[len(w)-1] != 14 {
		t.Fatalf("collected %d bytes: %v", len(w), w)
	}
	if q.bytes != 0 || len(q.inflight) != 10 || cs.gap {
		t.Fatalf("after collect: %d bytes, %d in flight, gap %v", q.bytes, len(q.inflight), cs.gap)
	}
}

// Written ticks wait for the acknowledgement of the byte offset they end
// at; an ack of an earlier connection counts for nothing.
func TestSendQueueAcks(t *testing.T) {
	q := newTestQueue(1 << 20)
	cs := &ClientStream{s: &Stream{node: "cn01"}}
	conn := q.connected()
	var off uint64
	for i := range 4 {
		pushTick(q, cs, i, 10)
		w := q.collect(nil, 1<<20)
		off += uint64(len(w))
		q.written(nil, off, nil)
	}
	if n := len(q.unacked) - q.uhead; n != 4 {
		t.Fatalf("%d unacked, want 4", n)
	}
	q.acked(conn-1, off) // a stale connection's ack
	if n := len(q.unacked) - q.uhead; n != 4 {
		t.Fatalf("stale ack took %d", 4-n)
	}
	first := q.deliveredBefore()
	q.acked(conn, 20)
	if n := len(q.unacked) - q.uhead; n != 2 {
		t.Fatalf("%d unacked after the ack of two ticks, want 2", n)
	}
	if !q.deliveredBefore().After(first) {
		t.Error("delivered time did not move on with the ack")
	}
	q.acked(conn, off)
	if len(q.unacked) != 0 || q.deliveredBefore().Before(first) {
		t.Fatalf("%d unacked after the last ack", len(q.unacked))
	}
}

// After a lost connection the ticks not acknowledged and those queued come
// back oldest first with their values, the node-level frames in their
// places; a tick whose values the bound let go is a gap.
func TestSendQueueLostGivesTicksBack(t *testing.T) {
	q := newTestQueue(1 << 20)
	cs := &ClientStream{s: &Stream{node: "cn01"}}
	push := func(i int) {
		cs.s.valuesAt, cs.s.key = 0, true
		q.push(entry{buf: append(q.take(), byte(i)), cs: cs, t: time.Unix(int64(i), 0), vals: q.keep([]float64{float64(i)})})
	}
	q.connected()
	push(0)
	push(1)
	q.written(nil, uint64(len(q.collect(nil, 1<<20))), nil) // unacked: 0, 1
	q.push(entry{buf: AppendNodeState(q.take(), "cn02", false, time.Unix(2, 0))})
	push(3)
	q.unacked[q.uhead].vals = nil // as if the bound had let it go
	again, reset := q.lost(nil)
	if !reset {
		t.Fatal("frames went out, yet no reset")
	}
	var got []string
	for _, e := range again {
		switch {
		case e.cs == nil:
			got = append(got, "state")
		default:
			got = append(got, fmt.Sprint(e.t.Unix(), "=", e.vals))
		}
	}
	if fmt.Sprint(got) != "[1=[1] state 3=[3]]" {
		t.Errorf("given back %v, want tick 1, the node state, tick 3", got)
	}
	if q.stats.Dropped.Load() != 1 || !cs.gap || cs.gapFrom != time.Unix(0, 0) || cs.gapTo != time.Unix(0, 0) {
		t.Errorf("%d dropped, gap %v %v..%v; want tick 0 only", q.stats.Dropped.Load(), cs.gap, cs.gapFrom.Unix(), cs.gapTo.Unix())
	}
	if q.bytes != 0 || len(q.unacked) != 0 || q.head != len(q.q) {
		t.Errorf("queue not empty after lost: %d bytes, %d unacked", q.bytes, len(q.unacked))
	}
}

// Values of written ticks count against the bound too: past it the oldest
// let theirs go, so they would be gaps, never memory without limit.
func TestSendQueueUnackedBound(t *testing.T) {
	q := newTestQueue(800) // room for the values of 10 ticks of 10
	cs := &ClientStream{s: &Stream{node: "cn01"}}
	q.connected()
	var off uint64
	for i := range 30 {
		cs.s.valuesAt, cs.s.key = 0, true
		q.push(entry{buf: append(q.take(), byte(i)), cs: cs, t: time.Unix(int64(i), 0), vals: q.keep(make([]float64, 10))})
		off += uint64(len(q.collect(nil, 1<<20)))
		q.written(nil, off, nil)
	}
	kept := 0
	for _, e := range q.unacked[q.uhead:] {
		if e.vals != nil {
			kept++
		}
	}
	if kept != 10 || q.unackedBytes != 800 || q.unacked[len(q.unacked)-1].vals == nil {
		t.Errorf("%d unacked ticks keep values (%d bytes), want the newest 10", kept, q.unackedBytes)
	}
}

// TestSendQueueFind: find returns the entry of a sequence number, or nil
// when it is not queued, as a scan of the queue would: while frames go
// out from the head and after tombstones are reclaimed, which leaves
// holes in the numbers.
func TestSendQueueFind(t *testing.T) {
	q := newTestQueue(1 << 30)
	rng := rand.New(rand.NewPCG(7, 7))
	scan := func(seq uint64) *entry {
		for i := q.head; i < len(q.q); i++ {
			if q.q[i].seq == seq && seq != 0 {
				return &q.q[i]
			}
		}
		return nil
	}
	check := func(when string) {
		for seq := uint64(0); seq <= q.seq+2; seq++ {
			if got, want := q.find(seq), scan(seq); got != want {
				t.Fatalf("%s: find(%d) = %p, a scan finds %p", when, seq, got, want)
			}
		}
	}
	check("empty")
	for round := range 20 {
		for range 200 {
			q.push(entry{buf: append(q.take(), make([]byte, 8)...)})
		}
		check(fmt.Sprintf("round %d, pushed", round))
		q.collect(nil, 8*rng.IntN(100)) // some go out from the head
		q.inflight = q.inflight[:0]
		check(fmt.Sprintf("round %d, collected", round))
		for i := q.head; i < len(q.q); i++ {
			if rng.IntN(3) > 0 && !q.q[i].dead {
				q.kill(&q.q[i])
			}
		}
		q.reclaim()
		check(fmt.Sprintf("round %d, reclaimed", round))
	}
}

// A burst (the upstream away for a while, then thousands of ticks
// queued at once) leaves no lasting memory in the buffers kept for
// reuse: once the flow is steady again, they are as many as it needs.
func TestSendQueueForgetsBursts(t *testing.T) {
	q := newTestQueue(1 << 30)
	cs := &ClientStream{s: &Stream{node: "cn01"}}
	conn := q.connected()
	var off uint64
	step := func(i, queued int) {
		for k := range queued {
			pushTick(q, cs, i*queued+k, 300)
		}
		w := q.collect(nil, 1<<30)
		off += uint64(len(w))
		q.written(nil, off, nil)
		q.acked(conn, off)
	}
	// Bursts for a window of pushes: their buffers are worth keeping.
	const burst = 20000
	for i := range freeWindow/burst + 2 {
		step(i, burst)
	}
	if len(q.free) < burst {
		t.Fatalf("after the bursts: %d buffers kept, want at least %d", len(q.free), burst)
	}
	// Then 10 ticks at a time for two windows of pushes.
	for i := 1; i <= 2*freeWindow/10+1; i++ {
		step(i, 10)
	}
	if len(q.free) > minFree {
		t.Errorf("steady flow after the bursts: %d buffers kept, want at most %d", len(q.free), minFree)
	}
}
