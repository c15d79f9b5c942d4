package remotewrite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
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
// A round also reads at most backfillSamples, so that queueing them holds
// the queue's lock, which the ingest path takes too, for a millisecond or
// two, not for a whole half queue.
const (
	backfillSeries  = 2000
	backfillSamples = 1 << 16
	backfillFill    = 0.5
	backfillEvery   = 200 * time.Millisecond
	backfillPause   = 3 // a round's time × this between rounds
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
	// caughtUp: the backfill read it to its newest stored sample, and
	// samples from from on are live again. The entry stays until the
	// series' next push, which it drops if older than from (stored before
	// the read, pushed after it), or until swept (caughtUpKeep).
	caughtUp bool
}

// caughtUpKeep is how long a caught-up entry waits for its series' next
// push before it is swept.
const caughtUpKeep = 5 * time.Second

// What lagPushLocked did with a sample.
const (
	pushQueue    = iota // queue it as usual (dropping the oldest if it must)
	pushDeferred        // not queued: its series is behind
	pushResent          // not queued: the backfill sent it already
)

// lagPushLocked is push's path for a sample when series are behind or the
// queue or p is full: the series behind keep theirs in the store, and a
// sample that does not fit makes its series fall behind.
func (q *queue) lagPushLocked(s sample, h uint64, p *partition) int {
	k := labelKey(s.labels)
	if e := q.lagging[k]; e != nil {
		if !e.caughtUp {
			e.pushes++
			return pushDeferred
		}
		// Its first sample since the backfill caught up: one stored
		// before the last read but pushed after it was sent already.
		delete(q.lagging, k)
		if s.t < e.from {
			return pushResent
		}
	}
	if len(q.lagging) < maxLagging && (q.queued >= q.cfg.QueueCapacity || p.n == len(p.ring) && !q.grow(p)) {
		e := &lagEntry{labels: s.labels, hash: h, from: s.t, pushes: 1}
		q.lagging[k] = e
		q.behind++
		q.fresh = append(q.fresh, e)
		return pushDeferred
	}
	return pushQueue
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
			if e.caughtUp {
				e.caughtUp = false
				q.behind++
				q.fresh = append(q.fresh, e)
			}
			e.from = min(e.from, s.t)
			e.pushes++
			continue
		}
		if len(q.lagging) >= maxLagging {
			lost++
			continue
		}
		e := &lagEntry{labels: s.labels, hash: maphash.Bytes(q.seed, s.labels), from: s.t, pushes: 1}
		q.lagging[k] = e
		q.behind++
		q.fresh = append(q.fresh, e)
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
	n := q.loadsLocked(&sums)
	q.mu.Unlock()
	q.stats.enqueued.Add(uint64(len(ss)))
	q.stats.backfilled.Add(uint64(len(ss)))
	q.wakeSenders(&sums, n, 1)
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
			start := time.Now()
			progress, err := q.backfillRound(ctx, &b)
			if err != nil {
				q.stats.backfillErrors.Add(1)
				q.fail(fmt.Errorf("backfill from the store: %w", err))
				break
			}
			if !progress {
				break
			}
			// A quarter of a core at most: reading the store must leave
			// the ingest path the CPU it needs on a busy server.
			select {
			case <-ctx.Done():
				return
			case <-time.After(backfillPause * time.Since(start)):
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
	items  []bfItem
	out    []sample
	hs     []uint64
	it     chunkenc.Iterator
	byKey  map[string]int   // items by encoded label set
	groups map[string][]int // items by job and instance
	order  []string         // groups' keys, in the order found
	ms     []*labels.Matcher
	lbuf   []byte
	pass   []passEntry // series behind in node order; e nil once caught up
	pos    int         // pass[pos:] are still to read in this pass
	spare  []*lagEntry // q.fresh's next backing array
	caught []caughtRef // entries caught up, oldest first, for the sweep
	behind bool        // series were behind at the last round (logChange)
}

// caughtRef is an entry the backfill marked caught up, and when.
type caughtRef struct {
	key string
	e   *lagEntry
	at  time.Time
}

// passEntry is a series behind in a pass, with its job and instance.
type passEntry struct {
	key  string
	e    *lagEntry
	node string
}

// bfItem is a series a round reads: its entry as the round found it.
type bfItem struct {
	e        *lagEntry
	key      string
	pass     int // its index in the pass
	lset     labels.Labels
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
	room := min(int(float64(q.cfg.QueueCapacity)*backfillFill)-q.queued, backfillSamples)
	b.sweepLocked(q)
	behind := q.behind
	if behind == 0 || room <= 0 {
		q.mu.Unlock()
		b.logChange(q, behind)
		return false, nil
	}
	if b.pos >= len(b.pass) {
		// A new pass: the series still behind after the last one and those
		// that fell behind since, in node order, so a round's series share
		// nodes (below). Nothing here walks the whole map under the lock
		// the ingest path takes.
		fresh := q.fresh
		q.fresh = b.spare[:0]
		q.mu.Unlock()
		kept := b.pass[:0]
		for _, p := range b.pass {
			if p.e != nil {
				kept = append(kept, p)
			}
		}
		for _, e := range fresh {
			kept = append(kept, passEntry{key: labelKey(e.labels), e: e,
				node: labelValue(e.labels, "job") + "\xff" + labelValue(e.labels, "instance")})
		}
		clear(fresh)
		b.spare = fresh[:0]
		slices.SortFunc(kept, func(x, y passEntry) int { return strings.Compare(x.node, y.node) })
		b.pass, b.pos = kept, 0
		q.mu.Lock()
	}
	b.items = b.items[:0]
	minFrom := int64(math.MaxInt64)
	for ; b.pos < len(b.pass) && len(b.items) < backfillSeries; b.pos++ {
		p := &b.pass[b.pos]
		if p.e == nil {
			continue
		}
		if e := q.lagging[p.key]; e != p.e || e.caughtUp { // never: only the backfill ends an entry behind
			p.e = nil
			continue
		}
		b.items = append(b.items, bfItem{e: p.e, key: p.key, pass: b.pos, from: p.e.from, pushes: p.e.pushes, last: p.e.from - 1})
		minFrom = min(minFrom, p.e.from)
	}
	q.mu.Unlock()
	b.logChange(q, behind)
	if len(b.items) == 0 {
		return b.pos < len(b.pass), nil
	}

	// A node's series are read with one Select of its job and instance
	// (the tree's series all have them) instead of one per series: a
	// Select costs about as much as reading a minute of its series.
	if b.byKey == nil {
		b.byKey, b.groups = map[string]int{}, map[string][]int{}
	}
	clear(b.byKey)
	for k, v := range b.groups {
		b.groups[k] = v[:0]
	}
	b.order = b.order[:0]
	for i := range b.items {
		it := &b.items[i]
		lset, err := decodeLabelSet(it.e.labels)
		if err != nil { // never: the writer encoded it
			it.complete = true
			continue
		}
		it.lset = lset
		b.byKey[it.key] = i
		g := lset.Get("job") + "\xff" + lset.Get("instance")
		if len(b.groups[g]) == 0 {
			b.order = append(b.order, g)
		}
		b.groups[g] = append(b.groups[g], i)
	}

	qr, err := q.source.Querier(minFrom, math.MaxInt64)
	if err != nil {
		return false, err
	}
	defer qr.Close()
	b.out, b.hs = b.out[:0], b.hs[:0]
	for _, g := range b.order {
		if len(b.out) >= room {
			break
		}
		idx := b.groups[g]
		first := &b.items[idx[0]]
		b.ms = b.ms[:0]
		if inst := first.lset.Get("instance"); inst != "" && len(idx) > 1 {
			b.ms = append(b.ms, labels.MustNewMatcher(labels.MatchEqual, "job", first.lset.Get("job")),
				labels.MustNewMatcher(labels.MatchEqual, "instance", inst))
		} else {
			for _, i := range idx {
				if err := q.readSeries(ctx, qr, b, &b.items[i], room); err != nil {
					return false, err
				}
			}
			continue
		}
		ss := qr.Select(ctx, false, nil, b.ms...)
		full := false
		for ss.Next() && !full {
			s := ss.At()
			b.lbuf = appendLabelSet(b.lbuf[:0], s.Labels())
			i, ok := b.byKey[string(b.lbuf)]
			if !ok {
				continue
			}
			full, err = q.readInto(b, &b.items[i], s, room)
			if err != nil {
				return false, err
			}
		}
		if err := ss.Err(); err != nil {
			return false, err
		}
		if !full {
			for _, i := range idx {
				b.items[i].complete = true // read whole, or none stored
			}
		}
	}
	if len(b.out) > 0 {
		q.pushBackfill(b.out, b.hs)
	}
	clear(b.out) // let go of label sets
	freed := 0
	now := time.Now()
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
			it.e.caughtUp = true
			q.behind--
			freed++
			b.pass[it.pass].e = nil
			b.caught = append(b.caught, caughtRef{key: it.key, e: it.e, at: now})
		}
		it.e, it.lset = nil, labels.EmptyLabels()
	}
	q.mu.Unlock()
	return len(b.out) > 0 || freed > 0, nil
}

// logChange logs when series start to fall behind and when all caught
// up, not each round.
func (b *backfiller) logChange(q *queue, behind int) {
	switch {
	case behind > 0 && !b.behind:
		b.behind = true
		q.log.Warn("remote write: series fell behind the queue; their samples wait in the store and are read back in order",
			"series", behind, "queue_capacity", q.cfg.QueueCapacity)
	case behind == 0 && b.behind:
		b.behind = false
		q.log.Info("remote write: caught up from the store", "samples_read_back", q.stats.backfilled.Load())
	}
}

// sweepLocked deletes the caught-up entries whose series did not push
// within caughtUpKeep (ended, or a rare sender), oldest first.
func (b *backfiller) sweepLocked(q *queue) {
	now := time.Now()
	n := 0
	for ; n < len(b.caught) && now.Sub(b.caught[n].at) > caughtUpKeep; n++ {
		c := b.caught[n]
		if e := q.lagging[c.key]; e == c.e && e.caughtUp {
			delete(q.lagging, c.key)
		}
	}
	if n > 0 {
		clear(b.caught[:n])
		b.caught = append(b.caught[:0], b.caught[n:]...)
	}
}

// readSeries reads one series by its whole label set.
func (q *queue) readSeries(ctx context.Context, qr storage.Querier, b *backfiller, it *bfItem, room int) error {
	if len(b.out) >= room {
		return nil
	}
	b.ms = b.ms[:0]
	it.lset.Range(func(l labels.Label) { b.ms = append(b.ms, labels.MustNewMatcher(labels.MatchEqual, l.Name, l.Value)) })
	ss := qr.Select(ctx, false, nil, b.ms...)
	full := false
	for ss.Next() && !full {
		s := ss.At()
		if !labels.Equal(s.Labels(), it.lset) {
			continue // a series with more labels
		}
		var err error
		if full, err = q.readInto(b, it, s, room); err != nil {
			return err
		}
	}
	if err := ss.Err(); err != nil {
		return err
	}
	it.complete = !full
	return nil
}

// readInto appends it's samples from it.from on to b.out, up to room in
// all; full reports that room ran out before the series' end.
func (q *queue) readInto(b *backfiller, it *bfItem, s storage.Series, room int) (full bool, err error) {
	b.it = s.Iterator(b.it)
	for vt := b.it.Seek(it.from); vt != chunkenc.ValNone; vt = b.it.Next() {
		if vt != chunkenc.ValFloat {
			continue // the tree sends no histograms
		}
		if len(b.out) >= room {
			return true, b.it.Err()
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
	return false, b.it.Err()
}

// labelValue returns the value of the label name in an encoded label set
// ("" if absent or malformed), without decoding the others.
func labelValue(b []byte, name string) string {
	for len(b) > 0 && b[0] == tagLabel {
		n, k := binary.Uvarint(b[1:])
		if k <= 0 || n > uint64(len(b)-1-k) {
			return ""
		}
		l := b[1+k : 1+k+int(n)]
		b = b[1+k+int(n):]
		ln, rest, ok := fieldBytes(l, tagLabelName)
		if ok && string(ln) == name {
			v, _, ok := fieldBytes(rest, tagLabelValue)
			if !ok {
				return ""
			}
			return string(v)
		}
	}
	return ""
}

// fieldBytes is field without the copy.
func fieldBytes(b []byte, tag byte) ([]byte, []byte, bool) {
	if len(b) == 0 || b[0] != tag {
		return nil, nil, false
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || n > uint64(len(b)-1-k) {
		return nil, nil, false
	}
	return b[1+k : 1+k+int(n)], b[1+k+int(n):], true
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
	v, rest, ok := fieldBytes(b, tag)
	if !ok {
		return "", nil, errors.New("label set: bad field length")
	}
	return string(v), rest, nil
}
