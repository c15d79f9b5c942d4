package remotewrite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"time"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// The backfill: the store holds every sample the tap forwards, so a sample
// that does not fit the queue need not be lost. Its series falls behind:
// from then on none of its samples is queued, and the backfill reads them
// back from the store, oldest first, once the queue has room. Samples of a
// series therefore still leave in order (what was queued before it fell
// behind is older and goes first; the backfill's go to the same partition
// and the series is live again only once the backfill caught up), so
// receivers without an out-of-order window (Prometheus) take them too.

// maxLagging bounds the series behind per destination (about 150 bytes
// each); beyond it the queue drops as it does without a source.
const maxLagging = 1 << 20

// Backfill pacing: a round reads at most backfillSeries series and fills
// the queue up to backfillFill of its capacity, so live samples of the
// series that kept up find room; rounds follow each other while there is
// work and room, else one every backfillEvery.
const (
	backfillSeries = 2000
	backfillFill   = 0.5
	backfillEvery  = 200 * time.Millisecond
)

// lagEntry is one series behind.
type lagEntry struct {
	labels []byte
	hash   uint64
	// from (ms) is its oldest sample not queued: the backfill reads from
	// here.
	from int64
	// pushes counts its samples not queued. A change while the backfill
	// read means a sample may have been stored after the read: the series
	// stays behind for another round.
	pushes uint64
}

// labelKey is the map key of an encoded label set, which is never
// modified once built (sample.labels), without a copy.
func labelKey(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// unsent takes back samples that left the queue but were not delivered
// (shutdown): with a source their series fall behind from their oldest
// such sample, else they are dropped and counted.
func (q *queue) unsent(b []sample) {
	if q.source == nil {
		q.stats.droppedShutdown.Add(uint64(len(b)))
		return
	}
	q.mu.Lock()
	lost := q.deferLocked(b)
	q.mu.Unlock()
	q.stats.deferred.Add(uint64(len(b) - lost))
	q.stats.droppedShutdown.Add(uint64(lost))
}

// deferLocked makes the series of b fall behind from their oldest sample
// in b; it returns the samples it could not keep (maxLagging).
func (q *queue) deferLocked(b []sample) (lost int) {
	for _, s := range b {
		k := labelKey(s.labels)
		if e := q.lagging[k]; e != nil {
			e.from = min(e.from, s.t)
			e.pushes++
			continue
		}
		if len(q.lagging) >= maxLagging {
			lost++
			continue
		}
		q.lagging[k] = &lagEntry{labels: s.labels, hash: maphash.Bytes(q.seed, s.labels), from: s.t, pushes: 1}
	}
	return lost
}

// drainUnsent takes every sample still queued back (the senders stopped).
func (q *queue) drainUnsent() {
	q.mu.Lock()
	var b []sample
	for i := range q.parts {
		p := &q.parts[i]
		for p.n > 0 {
			b = append(b, p.ring[p.head])
			p.dropOldest()
		}
	}
	q.queued = 0
	q.mu.Unlock()
	if len(b) > 0 {
		q.unsent(b)
	}
}

// pushBackfill queues samples read back for series behind. It never drops:
// a round reads only what the queue has room for, and may overfill it by
// what live samples took meanwhile, at most one round's worth.
func (q *queue) pushBackfill(ss []sample, hs []uint64) {
	var sums [MaxShardsLimit]int
	np := uint64(len(q.parts))
	q.mu.Lock()
	for i, s := range ss {
		p := &q.parts[hs[i]%np]
		if p.n == len(p.ring) && !q.grow(p) {
			q.growBeyond(p)
		}
		p.put(s)
		q.queued++
	}
	n := int(q.shards.Load())
	for i := range q.parts {
		sums[i%n] += q.parts[i].n
	}
	q.mu.Unlock()
	q.stats.enqueued.Add(uint64(len(ss)))
	q.stats.backfilled.Add(uint64(len(ss)))
	for i := range n {
		if sums[i] > 0 {
			q.signal(i)
		}
	}
}

// growBeyond doubles p's ring outside the slot budget (pushBackfill's
// bounded overfill); take shrinks it back once drained.
func (q *queue) growBeyond(p *partition) {
	r := make([]sample, 2*len(p.ring)+64)
	for j := range p.n {
		r[j] = p.ring[(p.head+j)%len(p.ring)]
	}
	q.slots += len(r) - len(p.ring)
	p.ring, p.head = r, 0
}

// backfillLoop reads series behind back from the source until ctx ends.
func (q *queue) backfillLoop(ctx context.Context) {
	t := time.NewTicker(backfillEvery)
	defer t.Stop()
	var b backfiller
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-q.bfWake:
		}
		for ctx.Err() == nil {
			progress, err := q.backfillRound(ctx, &b)
			if err != nil {
				q.stats.backfillErrors.Add(1)
				q.fail(fmt.Errorf("backfill from the store: %w", err))
				break
			}
			if !progress {
				break
			}
		}
	}
}

func (q *queue) wakeBackfill() {
	select {
	case q.bfWake <- struct{}{}:
	default:
	}
}

// backfiller is one backfill loop's reused buffers.
type backfiller struct {
	items []bfItem
	out   []sample
	hs    []uint64
	it    chunkenc.Iterator
}

// bfItem is a series a round reads: its entry as the round found it.
type bfItem struct {
	e        *lagEntry
	key      string
	from     int64
	pushes   uint64
	last     int64 // newest sample read
	complete bool  // read to the store's newest sample
}

// backfillRound reads up to backfillSeries series behind from the store,
// as many samples as the queue has room for, queues them and returns the
// series that caught up to live. It reports whether it queued or freed
// anything.
func (q *queue) backfillRound(ctx context.Context, b *backfiller) (bool, error) {
	q.mu.Lock()
	room := int(float64(q.cfg.QueueCapacity)*backfillFill) - q.queued
	if len(q.lagging) == 0 || room <= 0 {
		q.mu.Unlock()
		return false, nil
	}
	b.items = b.items[:0]
	minFrom := int64(math.MaxInt64)
	for k, e := range q.lagging { // map order: no series waits forever
		b.items = append(b.items, bfItem{e: e, key: k, from: e.from, pushes: e.pushes, last: e.from - 1})
		minFrom = min(minFrom, e.from)
		if len(b.items) == backfillSeries {
			break
		}
	}
	q.mu.Unlock()

	qr, err := q.source.Querier(minFrom, math.MaxInt64)
	if err != nil {
		return false, err
	}
	defer qr.Close()
	b.out, b.hs = b.out[:0], b.hs[:0]
	var ms []*labels.Matcher
	for i := range b.items {
		it := &b.items[i]
		if len(b.out) >= room {
			break
		}
		lset, err := decodeLabelSet(it.e.labels)
		if err != nil { // never: the writer encoded it
			it.complete = true
			continue
		}
		ms = ms[:0]
		lset.Range(func(l labels.Label) { ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, l.Name, l.Value)) })
		ss := qr.Select(ctx, false, nil, ms...)
		it.complete = true
		for ss.Next() {
			s := ss.At()
			if !labels.Equal(s.Labels(), lset) {
				continue // a series with more labels
			}
			b.it = s.Iterator(b.it)
			for vt := b.it.Seek(it.from); vt != chunkenc.ValNone; vt = b.it.Next() {
				if vt != chunkenc.ValFloat {
					continue // the tree sends no histograms
				}
				if len(b.out) >= room {
					it.complete = false
					break
				}
				t, v := b.it.At()
				if t < it.from {
					continue
				}
				it.last = t
				if value.IsStaleNaN(v) {
					continue // gaps' markers stay the store's (tap.Gap)
				}
				b.out = append(b.out, sample{labels: it.e.labels, t: t, v: v})
				b.hs = append(b.hs, it.e.hash)
			}
			if err := b.it.Err(); err != nil {
				return false, err
			}
		}
		if err := ss.Err(); err != nil {
			return false, err
		}
	}
	if len(b.out) > 0 {
		q.pushBackfill(b.out, b.hs)
	}
	clear(b.out) // let go of label sets
	freed := 0
	q.mu.Lock()
	for i := range b.items {
		it := &b.items[i]
		if it.e.from == it.from { // unsent may have moved it back meanwhile
			it.e.from = it.last + 1
		}
		// Every sample not queued was pushed after it was stored, and the
		// store takes a series' samples in order: with no push since the
		// round began, the read saw all of them.
		if it.complete && it.e.pushes == it.pushes {
			delete(q.lagging, it.key)
			freed++
		}
		it.e = nil
	}
	q.mu.Unlock()
	return len(b.out) > 0 || freed > 0, nil
}

// decodeLabelSet parses a label set as appendLabel encodes it.
func decodeLabelSet(b []byte) (labels.Labels, error) {
	var sb labels.ScratchBuilder
	for len(b) > 0 {
		if b[0] != tagLabel {
			return labels.EmptyLabels(), fmt.Errorf("label set: tag %#x, want %#x", b[0], tagLabel)
		}
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > uint64(len(b)-1-k) {
			return labels.EmptyLabels(), errors.New("label set: bad label length")
		}
		l := b[1+k : 1+k+int(n)]
		b = b[1+k+int(n):]
		name, rest, err := field(l, tagLabelName)
		if err != nil {
			return labels.EmptyLabels(), err
		}
		val, rest, err := field(rest, tagLabelValue)
		if err != nil {
			return labels.EmptyLabels(), err
		}
		if len(rest) != 0 || name == "" {
			return labels.EmptyLabels(), errors.New("label set: malformed label")
		}
		sb.Add(name, val)
	}
	sb.Sort()
	return sb.Labels(), nil
}

// field parses one length-delimited string field with the given tag.
func field(b []byte, tag byte) (string, []byte, error) {
	if len(b) == 0 || b[0] != tag {
		return "", nil, fmt.Errorf("label set: missing field %#x", tag)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return "", nil, errors.New("label set: bad field length")
	}
	return string(b[1+k : 1+k+int(n)]), b[1+k+int(n):], nil
}
