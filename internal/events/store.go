package events

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/segfile"
)

// Defaults of Options fields left zero.
const (
	DefaultRetention    = 90 * 24 * time.Hour
	DefaultMaxEvents    = 5_000_000
	DefaultSegmentBytes = 64 << 20
	DefaultQueue        = 16384 // a failover's gaps for thousands of nodes at once
	DefaultMaxClients   = 64
	DefaultKeepAlive    = 15 * time.Second
)

// Options configure a Store.
type Options struct {
	Dir string // <data>/events
	// Retention drops whole segments whose newest event is older.
	Retention time.Duration
	// MaxEvents bounds the events kept (and so the index's memory, about
	// 40 bytes an event): beyond it the oldest segments go, whole.
	MaxEvents int
	// SegmentBytes starts a new segment beyond this size; one also starts
	// every UTC day, so retention drops days.
	SegmentBytes int64
	// Queue bounds the events waiting for the writer; Emit drops beyond.
	Queue int
	// MaxClients bounds the live streams (SSE); more get 503.
	MaxClients int
	// KeepAlive is the interval of the streams' keep-alive comments.
	KeepAlive    time.Duration
	Registerer   prometheus.Registerer // nil: not registered
	Logger       *slog.Logger
	now          func() time.Time // tests
	writeTimeout time.Duration    // tests; 0: 10s

	// Stored, if set, is given every event once it is written, with its
	// ID, on the writer goroutine (the bus spools them; docs/bus.md).
	Stored Sink
}

// Store keeps events in append-only segment files under Dir with an index
// of every event in memory. It is a Sink: Emit queues, one writer
// goroutine assigns IDs, writes, indexes and passes each event on to the
// live streams.
type Store struct {
	o   Options
	log *slog.Logger

	q      chan Event
	done   chan struct{}
	exited chan struct{}
	closed atomic.Bool
	// calls runs functions on the writer's goroutine, which owns the
	// segments (Sync).
	calls chan func()

	mu      sync.RWMutex // guards what follows; the writer alone changes it
	segs    []*segment   // oldest first; the last is written
	baseSeq uint32       // seq of segs[0]
	entries []entry      // every event, by ID
	nodes   interner
	multi   [][]uint32 // node IDs of the events of several nodes (entry.node has multiNode set)
	jobs    interner
	kinds   interner
	next    uint64 // next ID

	subMu   sync.Mutex
	subs    map[*sub]struct{}
	clients atomic.Int32

	m metrics
}

// multiNode marks an entry's node as an index into Store.multi.
const multiNode = 1 << 31

// entry is one event in the index: what filters need, and where the rest
// is on disk. 40 bytes.
type entry struct {
	id   uint64
	t    int64 // unix nanoseconds
	node uint32
	job  uint32
	seg  uint32 // segment seq
	off  uint32 // of the record in its segment
	kind uint16
	sev  uint8
}

type segment struct {
	seq   uint32
	first uint64 // the ID in its name: no event in it has a smaller one
	path  string
	f     *os.File
	size  int64
	day   int64 // unix day of its creation (UTC)
	maxT  int64 // newest event time in it, unix nanoseconds
	n     int   // events in it
}

type metrics struct {
	stored   *prometheus.CounterVec
	dropped  prometheus.Counter
	errors   prometheus.Counter
	events   prometheus.Gauge
	clients  prometheus.Gauge
	slowSubs prometheus.Counter
}

var severities = [...]string{SeverityInfo, SeverityWarning, SeverityCritical}

func sevIndex(s string) uint8 {
	for i, v := range severities {
		if v == s {
			return uint8(i)
		}
	}
	return 0
}

// interner maps strings to small numbers; 0 is "".
type interner struct {
	ids   map[string]uint32
	names []string
}

func (in *interner) id(s string) uint32 {
	if s == "" {
		return 0
	}
	if in.ids == nil {
		in.ids, in.names = map[string]uint32{}, []string{""}
	}
	if id, ok := in.ids[s]; ok {
		return id
	}
	id := uint32(len(in.names))
	in.ids[s] = id
	in.names = append(in.names, s)
	return id
}

func (in *interner) lookup(s string) (uint32, bool) {
	if s == "" {
		return 0, true
	}
	id, ok := in.ids[s]
	return id, ok
}

// Open reads the segments in o.Dir (created if missing), cutting a torn
// tail off the newest, and starts the writer. Close stops it.
func Open(o Options) (*Store, error) {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	o.SegmentBytes = min(o.SegmentBytes, 1<<31) // offsets are 32-bit
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultMaxClients
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.writeTimeout <= 0 {
		o.writeTimeout = writeTimeout
	}
	if o.now == nil {
		o.now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{o: o, log: log, q: make(chan Event, o.Queue), done: make(chan struct{}), exited: make(chan struct{}), calls: make(chan func()),
		subs: map[*sub]struct{}{}, next: 1}
	s.m = metrics{
		stored:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_events_stored_total", Help: "Events stored, by kind."}, []string{"kind"}),
		dropped:  prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_events_dropped_total", Help: "Events dropped: the writer's queue was full, the store closed or a write failed."}),
		errors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_events_write_errors_total", Help: "Event segment writes, syncs or removals that failed."}),
		events:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_events", Help: "Events kept in the event store."}),
		clients:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_events_stream_clients", Help: "Live event streams (SSE) open."}),
		slowSubs: prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_events_stream_dropped_total", Help: "Live event streams ended because the client read too slowly."}),
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if err := s.load(); err != nil {
		s.closeFiles()
		return nil, err
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{s.m.stored, s.m.dropped, s.m.errors, s.m.events, s.m.clients, s.m.slowSubs} {
			if err := o.Registerer.Register(c); err != nil {
				s.closeFiles()
				return nil, err
			}
		}
	}
	s.m.events.Set(float64(len(s.entries)))
	go s.run()
	return s, nil
}

const segSuffix = ".events"

func segName(first uint64) string { return fmt.Sprintf("%016x%s", first, segSuffix) }

// load indexes every segment; a torn or corrupt tail of the newest one is
// cut off (a crash mid-write), one of an older one is skipped and logged.
func (s *Store) load() error {
	firsts, err := segfile.Numbered(s.o.Dir, segSuffix, 16)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i, first := range firsts {
		if err := s.loadSegment(filepath.Join(s.o.Dir, segName(first)), first, i == len(firsts)-1); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) loadSegment(path string, first uint64, last bool) error {
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	seg := &segment{seq: s.baseSeq + uint32(len(s.segs)), first: first, path: path, f: f}
	var fileSize int64
	if fi, err := f.Stat(); err == nil {
		seg.day, fileSize = fi.ModTime().Unix()/86400, fi.Size()
	}
	s.next = max(s.next, first)
	r := bufio.NewReaderSize(f, 1<<20)
	hdr := make([]byte, fileHeaderLen)
	hn, _ := io.ReadFull(r, hdr)
	if herr := checkFileHeader(hdr[:hn]); herr != nil {
		if fileSize > fileHeaderLen || !last {
			// Not ours or damaged at the start: leave it for a person.
			f.Close()
			s.log.Warn("event segment skipped", "file", path, "err", herr)
			return nil
		}
		// A header torn by a crash: write it again.
		if err := s.truncate(f, path, 0); err != nil {
			return err
		}
		if _, err := f.WriteAt(fileHeader(), 0); err != nil {
			f.Close()
			return fmt.Errorf("events: %s: %w", path, err)
		}
		fileSize = fileHeaderLen
	}
	off := int64(fileHeaderLen)
	buf := make([]byte, 0, 4096)
	for off < fileSize {
		e, n, err := readRecord(r, &buf)
		if err == nil && e.ID < s.next {
			err = fmt.Errorf("%w: id %d after %d", errCorrupt, e.ID, s.next-1)
		}
		if err == nil && off+int64(n) > math.MaxUint32 {
			// Offsets are 32-bit; no segment of ours is this large.
			s.log.Warn("event segment: indexed up to 4 GiB, rest skipped", "file", path)
			break
		}
		if err != nil {
			if !last {
				s.log.Warn("event segment: corrupt record, rest skipped", "file", path, "offset", off, "err", err)
				break
			}
			s.log.Warn("event segment: torn or corrupt tail cut off", "file", path, "offset", off, "bytes", fileSize-off, "err", err)
			if err := s.truncate(f, path, off); err != nil {
				return err
			}
			fileSize = off
			break
		}
		s.index(seg, &e, uint32(off))
		off += int64(n)
	}
	seg.size = off
	if fileSize > off {
		seg.size = max(off, s.o.SegmentBytes) // appended to no more: the next write starts a segment
	}
	s.segs = append(s.segs, seg)
	return nil
}

// readRecord reads the next record from r into *buf (grown as needed).
// A record cut short by the end of the file is errShort.
func readRecord(r *bufio.Reader, buf *[]byte) (Event, int, error) {
	hdr, err := r.Peek(recHeaderLen)
	if err != nil {
		return Event{}, 0, errShort
	}
	n := int(binary.LittleEndian.Uint32(hdr))
	if n == 0 || n > maxPayload {
		return Event{}, 0, fmt.Errorf("%w: payload length %d, want 1 to %d", errCorrupt, n, maxPayload)
	}
	if cap(*buf) < recHeaderLen+n {
		*buf = make([]byte, recHeaderLen+n)
	}
	b := (*buf)[:recHeaderLen+n]
	if _, err := io.ReadFull(r, b); err != nil {
		return Event{}, 0, errShort
	}
	return decodeRecord(b)
}

func (s *Store) truncate(f *os.File, path string, size int64) error {
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("events: cut the torn tail of %s: %w", path, err)
	}
	return nil
}

// index adds e, stored at off in seg, to the in-memory index; s.mu held
// for writing (or not yet shared).
func (s *Store) index(seg *segment, e *Event, off uint32) {
	node := s.nodes.id(e.Node)
	if len(e.Nodes) > 0 {
		ids := make([]uint32, 0, len(e.Nodes)+1)
		if node != 0 {
			ids = append(ids, node)
		}
		for _, n := range e.Nodes {
			ids = append(ids, s.nodes.id(n))
		}
		node = multiNode | uint32(len(s.multi))
		s.multi = append(s.multi, ids)
	}
	s.entries = append(s.entries, entry{
		id: e.ID, t: e.Time.UnixNano(), off: off, seg: seg.seq,
		node: node, job: s.jobs.id(e.Job), kind: uint16(min(s.kinds.id(e.Kind), 1<<16-1)), sev: sevIndex(e.Severity),
	})
	seg.n++
	seg.maxT = max(seg.maxT, e.Time.UnixNano())
	s.next = max(s.next, e.ID+1)
}

// Emit implements Sink: it queues e for the writer and never waits; a
// full queue or a closed store drops e (vigil_events_dropped_total).
func (s *Store) Emit(e Event) {
	if s.closed.Load() {
		s.m.dropped.Inc()
		return
	}
	select {
	case s.q <- e:
	default:
		s.m.dropped.Inc()
	}
}

// Close writes what is queued and stops the writer, ends the live
// streams and closes the files.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.done)
	<-s.exited
	s.subMu.Lock()
	for sb := range s.subs {
		delete(s.subs, sb)
		close(sb.ch)
	}
	s.subMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeFiles()
}

func (s *Store) closeFiles() error {
	var errs []error
	for _, sg := range s.segs {
		if sg.f != nil {
			errs = append(errs, sg.f.Close())
		}
	}
	s.segs = nil
	return errors.Join(errs...)
}

// maxBatch bounds the events written (and synced) together.
const maxBatch = 1024

// run is the writer: it takes batches off the queue and applies the
// retention every minute.
func (s *Store) run() {
	defer close(s.exited)
	s.retain()
	ret := time.NewTicker(time.Minute)
	defer ret.Stop()
	batch := make([]Event, 0, maxBatch)
	for {
		select {
		case e := <-s.q:
			batch = append(batch[:0], e)
			batch = s.drain(batch)
			s.write(batch)
		case <-ret.C:
			s.retain()
		case f := <-s.calls:
			f()
		case <-s.done:
			for {
				batch = s.drain(batch[:0])
				if len(batch) == 0 {
					return
				}
				s.write(batch)
			}
		}
	}
}

func (s *Store) drain(batch []Event) []Event {
	for len(batch) < maxBatch {
		select {
		case e := <-s.q:
			batch = append(batch, e)
		default:
			return batch
		}
	}
	return batch
}

// write stores a batch: IDs, one write and one fsync per segment touched,
// then the index and the live streams. A failed write drops the batch's
// events not yet written and cuts the segment back.
func (s *Store) write(batch []Event) {
	now := s.o.now()
	var buf []byte
	var pending []Event
	var offs []uint32
	seg := s.current()
	flush := func() bool {
		if len(pending) == 0 {
			return true
		}
		defer func() { buf, pending, offs = buf[:0], pending[:0], offs[:0] }()
		if seg == nil {
			s.m.dropped.Add(float64(len(pending)))
			return false
		}
		if _, err := seg.f.WriteAt(buf, seg.size); err != nil {
			return s.writeFailed(seg, len(pending), err)
		}
		if err := seg.f.Sync(); err != nil {
			return s.writeFailed(seg, len(pending), err)
		}
		s.mu.Lock()
		for i := range pending {
			s.index(seg, &pending[i], offs[i])
		}
		seg.size += int64(len(buf))
		n := len(s.entries)
		s.mu.Unlock()
		s.m.events.Set(float64(n))
		for i := range pending {
			s.m.stored.WithLabelValues(pending[i].Kind).Inc()
			s.publish(&pending[i])
			if s.o.Stored != nil {
				s.o.Stored.Emit(pending[i])
			}
		}
		return true
	}
	for i := range batch {
		e := batch[i]
		sanitize(&e, now)
		if seg == nil || seg.size+int64(len(buf)) >= s.o.SegmentBytes || seg.day != now.Unix()/86400 {
			flush()
			if seg = s.roll(now); seg == nil {
				s.m.dropped.Inc()
				continue
			}
		}
		e.ID = s.next
		s.next++
		offs = append(offs, uint32(seg.size)+uint32(len(buf)))
		buf = appendRecord(buf, &e)
		pending = append(pending, e)
	}
	flush()
	if len(s.entries) > s.o.MaxEvents {
		s.retain()
	}
}

func (s *Store) writeFailed(seg *segment, n int, err error) bool {
	s.m.errors.Inc()
	s.m.dropped.Add(float64(n))
	s.log.Warn("event store: write failed, events dropped", "file", seg.path, "events", n, "err", err)
	// Cut a partial write off so the next record follows a whole one.
	if terr := seg.f.Truncate(seg.size); terr != nil {
		s.log.Warn("event store: cutting a failed write failed", "file", seg.path, "err", terr)
	}
	return false
}

// current is the segment written to, nil if there is none yet.
func (s *Store) current() *segment {
	if len(s.segs) == 0 || s.segs[len(s.segs)-1].f == nil {
		return nil
	}
	return s.segs[len(s.segs)-1]
}

// roll starts a segment named after the next ID; nil if it cannot be
// created (the events that would go there are dropped).
func (s *Store) roll(now time.Time) *segment {
	if cur := s.current(); cur != nil && cur.n == 0 && cur.first == s.next && cur.size < s.o.SegmentBytes {
		// Empty (its name only holds the next ID): it serves for today.
		cur.day = now.Unix() / 86400
		return cur
	}
	path := filepath.Join(s.o.Dir, segName(s.next))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		if _, err = f.Write(fileHeader()); err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = syncDir(s.o.Dir)
		}
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}
	if err != nil {
		s.m.errors.Inc()
		s.log.Warn("event store: cannot start a segment", "file", path, "err", err)
		return nil
	}
	seg := &segment{first: s.next, path: path, f: f, size: fileHeaderLen, day: now.Unix() / 86400}
	s.mu.Lock()
	seg.seq = s.baseSeq + uint32(len(s.segs))
	s.segs = append(s.segs, seg)
	s.mu.Unlock()
	return seg
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// retain removes the oldest segments while their newest event is older
// than the retention or while there are more than MaxEvents. The newest
// segment is never removed while it holds events: a new, empty one is
// started first, whose name keeps the next ID across restarts.
func (s *Store) retain() {
	now := s.o.now()
	cut := now.Add(-s.o.Retention).UnixNano()
	total := len(s.entries)
	drop := 0
	for _, sg := range s.segs {
		if sg.n == 0 || (sg.maxT >= cut && total <= s.o.MaxEvents) {
			break
		}
		drop++
		total -= sg.n
	}
	if drop == 0 {
		return
	}
	if drop == len(s.segs) {
		if s.roll(now) == nil {
			drop-- // keep the newest: it holds the next ID
			if drop == 0 {
				return
			}
		}
	}
	s.mu.Lock()
	gone := s.segs[:drop]
	n := 0
	for _, sg := range gone {
		n += sg.n
	}
	s.segs = slices.Clone(s.segs[drop:])
	s.baseSeq += uint32(drop)
	s.entries = slices.Clone(s.entries[n:]) // lets the old array go
	s.compactNames()
	left := len(s.entries)
	s.mu.Unlock()
	s.m.events.Set(float64(left))
	for _, sg := range gone {
		sg.f.Close()
		if err := os.Remove(sg.path); err != nil {
			s.m.errors.Inc()
			s.log.Warn("event store: removing an old segment failed", "file", sg.path, "err", err)
		}
	}
	s.log.Debug("event segments removed", "segments", len(gone), "events", n)
}

// compactNames drops the interned nodes and jobs no kept event names, so
// a server that runs for years does not keep every job ID it ever saw;
// s.mu held for writing.
func (s *Store) compactNames() {
	if len(s.nodes.names) > 0 {
		var fresh interner
		remap := make([]uint32, len(s.nodes.names)) // old ID → new ID + 1
		to := func(id uint32) uint32 {
			if id == 0 {
				return 0
			}
			if remap[id] == 0 {
				remap[id] = fresh.id(s.nodes.names[id]) + 1
			}
			return remap[id] - 1
		}
		var multi [][]uint32
		for i := range s.entries {
			e := &s.entries[i]
			if e.node&multiNode == 0 {
				e.node = to(e.node)
				continue
			}
			l := slices.Clone(s.multi[e.node&^multiNode])
			for k := range l {
				l[k] = to(l[k])
			}
			e.node = multiNode | uint32(len(multi))
			multi = append(multi, l)
		}
		s.nodes, s.multi = fresh, multi
	}
	if len(s.jobs.names) > 0 {
		var fresh interner
		remap := make([]uint32, len(s.jobs.names))
		for i := range s.entries {
			e := &s.entries[i]
			if e.job == 0 {
				continue
			}
			if remap[e.job] == 0 {
				remap[e.job] = fresh.id(s.jobs.names[e.job]) + 1
			}
			e.job = remap[e.job] - 1
		}
		s.jobs = fresh
	}
}

// Len returns the number of events kept.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.entries)
}

// Sync waits until every event emitted before the call is written and
// indexed (for tests and an orderly hand-over); false if the store closed.
func (s *Store) Sync() bool {
	return s.do(func() {
		batch := make([]Event, 0, maxBatch)
		for batch = s.drain(batch); len(batch) > 0; batch = s.drain(batch[:0]) {
			s.write(batch)
		}
	})
}

// do runs f on the writer's goroutine and waits for it; false if the
// store closed first.
func (s *Store) do(f func()) bool {
	done := make(chan struct{})
	select {
	case s.calls <- func() { f(); close(done) }:
	case <-s.exited:
		return false
	}
	<-done
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
