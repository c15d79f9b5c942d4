package logstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configures a Store.
type Options struct {
	Dir          string
	Retention    time.Duration // drop segments whose newest record was received longer ago; 0 keeps
	MaxBytes     int64         // drop oldest segments while the total is larger; 0 keeps
	SegmentBytes int64         // start a new segment beyond this size; 32 MiB when 0
	Now          func() time.Time
	Log          *slog.Logger
}

// blockBytes is the spacing of the in-memory sparse index: a search reads
// whole blocks, newest first, and stops when it has enough.
const blockBytes = 64 << 10

// block is one sparse index entry: where a run of records starts and the
// range of message times in it.
type block struct {
	seq      uint64
	off      int64
	min, max int64
}

// segment is the in-memory summary of one segment file.
type segment struct {
	path        string
	first, last uint64 // sequence range; last < first when empty
	size        int64  // bytes of whole, durable records
	maxRecv     int64
	blocks      []block
}

func (g *segment) minTime() int64 {
	lo := int64(math.MaxInt64)
	for _, b := range g.blocks {
		lo = min(lo, b.min)
	}
	return lo
}

func (g *segment) maxTime() int64 {
	hi := int64(math.MinInt64)
	for _, b := range g.blocks {
		hi = max(hi, b.max)
	}
	return hi
}

// add extends the summary by one record written at off.
func (g *segment) add(off int64, r *Record, size int) {
	t := r.Time.UnixNano()
	if len(g.blocks) == 0 || off-g.blocks[len(g.blocks)-1].off >= blockBytes {
		g.blocks = append(g.blocks, block{seq: r.Seq, off: off, min: t, max: t})
	} else {
		b := &g.blocks[len(g.blocks)-1]
		b.min, b.max = min(b.min, t), max(b.max, t)
	}
	if g.last < g.first {
		g.first = r.Seq
	}
	g.last = r.Seq
	g.size = off + int64(size)
	g.maxRecv = max(g.maxRecv, r.Received.UnixNano())
}

// Store is the log store. Append is for one writer at a time (it is
// serialised); searches run concurrently with it.
type Store struct {
	opts Options
	log  *slog.Logger

	appendMu sync.Mutex // serialises Append and segment rotation
	active   *os.File   // the last segment, open for writing
	buf      []byte     // encoding buffer of Append

	mu      sync.RWMutex
	segs    []*segment // by sequence; the last is active
	nextSeq uint64
	changed chan struct{} // closed and replaced by every Append
	closed  bool
}

// Open opens or creates the store in opts.Dir, reading every segment to
// rebuild the index and cutting a torn record off the last one.
func Open(opts Options) (*Store, error) {
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 32 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("logstore: create %s: %w", opts.Dir, err)
	}
	s := &Store{opts: opts, log: opts.Log, nextSeq: 1, changed: make(chan struct{})}
	names, err := filepath.Glob(filepath.Join(opts.Dir, "*.seg"))
	if err != nil {
		return nil, fmt.Errorf("logstore: list %s: %w", opts.Dir, err)
	}
	sort.Strings(names) // fixed-width names sort by first sequence
	for i, name := range names {
		first, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), ".seg"), 10, 64)
		if err != nil {
			s.log.Warn("ignoring file with a non-segment name", "file", name)
			continue
		}
		g, err := loadSegment(name, first, i == len(names)-1, s.log)
		if err != nil {
			return nil, err
		}
		if g.last >= g.first && g.first < s.nextSeq {
			return nil, fmt.Errorf("logstore: %s: sequence %d overlaps the previous segment", name, g.first)
		}
		s.segs = append(s.segs, g)
		if g.last >= g.first {
			s.nextSeq = g.last + 1
		} else {
			s.nextSeq = max(s.nextSeq, first)
		}
	}
	if len(s.segs) == 0 {
		if err := s.newSegment(); err != nil {
			return nil, err
		}
	} else {
		g := s.segs[len(s.segs)-1]
		f, err := os.OpenFile(g.path, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("logstore: open %s: %w", g.path, err)
		}
		// Drop a torn tail so that new records follow the last whole one.
		if err := f.Truncate(g.size); err != nil {
			f.Close()
			return nil, fmt.Errorf("logstore: truncate %s: %w", g.path, err)
		}
		s.active = f
	}
	return s, nil
}

// loadSegment reads a segment file to rebuild its summary. Corruption in
// the last segment is a torn write and is cut off; in an older one it
// is logged and the rest of that segment is lost.
func loadSegment(path string, first uint64, last bool, log *slog.Logger) (*segment, error) {
	g := &segment{path: path, first: first, last: first - 1}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("logstore: open %s: %w", path, err)
	}
	defer f.Close()
	var off int64
	err = readRecords(f, 0, math.MaxInt64, func(at int64, v *view) bool {
		r := Record{Seq: v.seq, Time: time.Unix(0, v.time), Received: time.Unix(0, v.recv)}
		g.add(at, &r, 0)
		off = at
		return true
	}, func(end int64) { off = end })
	g.size = off
	if err != nil && !errors.Is(err, errCorrupt) {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	if err != nil {
		if last {
			log.Warn("cutting torn record at end of segment", "file", path, "offset", g.size, "err", err)
		} else {
			log.Error("segment corrupt; records after the offset are lost", "file", path, "offset", g.size, "err", err)
		}
	}
	return g, nil
}

// readRecords calls fn for each whole record in [from, to) of f, in order,
// until fn returns false. done receives the offset after the last whole
// record read. It returns errCorrupt (wrapped) for a bad record, a partial
// record at the end being one.
func readRecords(f *os.File, from, to int64, fn func(off int64, v *view) bool, done func(end int64)) error {
	buf := make([]byte, 0, 256<<10)
	off := from // file offset of buf[0]
	eof := false
	var v view
	for {
		// Decode what is buffered.
		p := 0
		for {
			if off+int64(p) >= to {
				done(off + int64(p))
				return nil
			}
			n, err := nextRecord(buf[p:], &v)
			if err != nil {
				done(off + int64(p))
				return fmt.Errorf("%w at offset %d", err, off+int64(p))
			}
			if n == 0 {
				break
			}
			if !fn(off+int64(p), &v) {
				done(off + int64(p) + int64(n))
				return nil
			}
			p += n
		}
		if eof {
			done(off + int64(p))
			if p < len(buf) {
				return fmt.Errorf("%w: %d bytes of partial record at offset %d", errCorrupt, len(buf)-p, off+int64(p))
			}
			return nil
		}
		// Keep the partial record, read more.
		rest := copy(buf, buf[p:])
		off += int64(p)
		buf = buf[:rest]
		if need := recordNeed(buf); need > cap(buf) {
			nb := make([]byte, rest, need)
			copy(nb, buf)
			buf = nb
		}
		n, err := f.ReadAt(buf[rest:cap(buf)], off+int64(rest))
		buf = buf[:rest+n]
		if err != nil {
			if !errors.Is(err, io.EOF) {
				done(off)
				return fmt.Errorf("read %s: %w", f.Name(), err)
			}
			eof = true
		}
	}
}

// recordNeed is the buffer size needed for the record starting in b.
func recordNeed(b []byte) int {
	if len(b) < headerSize {
		return headerSize
	}
	n := int(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	return min(n, maxRecord) + headerSize
}

func segName(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d.seg", first))
}

// newSegment starts a new active segment at nextSeq. Called with appendMu
// held or during Open.
func (s *Store) newSegment() error {
	path := segName(s.opts.Dir, s.nextSeq)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("logstore: create segment %s: %w", path, err)
	}
	// The new name must be durable too, or a crash could lose the file.
	if err := syncDir(s.opts.Dir); err != nil {
		f.Close()
		return err
	}
	if s.active != nil {
		s.active.Close()
	}
	s.active = f
	g := &segment{path: path, first: s.nextSeq, last: s.nextSeq - 1}
	s.mu.Lock()
	s.segs = append(s.segs, g)
	s.mu.Unlock()
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("logstore: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("logstore: sync dir %s: %w", dir, err)
	}
	return nil
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("logstore: closed")

// Append assigns sequence numbers to recs (setting their Seq), writes them
// and fsyncs: when it returns nil they survive a crash. On error nothing of
// the batch counts as written.
func (s *Store) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.mu.RLock()
	closed := s.closed
	g := s.segs[len(s.segs)-1]
	size := g.size
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if size >= s.opts.SegmentBytes {
		if err := s.newSegment(); err != nil {
			return err
		}
		s.mu.RLock()
		g = s.segs[len(s.segs)-1]
		s.mu.RUnlock()
		size = 0
		s.retain()
	}
	buf := s.buf[:0]
	seq := s.nextSeq
	for i := range recs {
		recs[i].Seq = seq
		seq++
		buf = appendRecord(buf, &recs[i])
	}
	s.buf = buf
	if _, err := s.active.WriteAt(buf, size); err != nil {
		return fmt.Errorf("logstore: write %s: %w", g.path, err)
	}
	if err := s.active.Sync(); err != nil {
		return fmt.Errorf("logstore: fsync %s: %w", g.path, err)
	}
	// Publish: readers see the records only now that they are durable.
	s.mu.Lock()
	off := size
	for i := range recs {
		n := recordLen(buf[off-size:])
		g.add(off, &recs[i], n)
		off += int64(n)
	}
	s.nextSeq = seq
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return nil
}

func recordLen(b []byte) int {
	return headerSize + int(uint32(b[0])|uint32(b[1])<<8|uint32(b[2])<<16|uint32(b[3])<<24)
}

// Changed returns a channel closed at the next successful Append.
func (s *Store) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

// LastSeq is the sequence number of the newest record, 0 when empty.
func (s *Store) LastSeq() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nextSeq - 1
}

// Stats describes the store.
type Stats struct {
	Segments int    `json:"segments"`
	Bytes    int64  `json:"bytes"`
	Records  uint64 `json:"records"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// Stats returns the current size of the store.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Segments: len(s.segs), LastSeq: s.nextSeq - 1}
	for _, g := range s.segs {
		st.Bytes += g.size
		if g.last >= g.first {
			st.Records += g.last - g.first + 1
			if st.FirstSeq == 0 {
				st.FirstSeq = g.first
			}
		}
	}
	return st
}

// ApplyRetention drops expired segments; the active one is first closed
// and replaced when all of it has expired.
func (s *Store) ApplyRetention() error {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if s.opts.Retention > 0 {
		s.mu.RLock()
		g := s.segs[len(s.segs)-1]
		expired := g.last >= g.first && g.maxRecv < s.opts.Now().Add(-s.opts.Retention).UnixNano()
		closed := s.closed
		s.mu.RUnlock()
		if expired && !closed {
			if err := s.newSegment(); err != nil {
				return err
			}
		}
	}
	s.retain()
	return nil
}

// retain removes segments beyond the retention limits, never the active one.
// Called with appendMu held.
func (s *Store) retain() {
	cutoff := int64(math.MinInt64)
	if s.opts.Retention > 0 {
		cutoff = s.opts.Now().Add(-s.opts.Retention).UnixNano()
	}
	for {
		s.mu.Lock()
		if len(s.segs) < 2 {
			s.mu.Unlock()
			return
		}
		var total int64
		for _, g := range s.segs {
			total += g.size
		}
		g := s.segs[0]
		if !(g.maxRecv < cutoff || (s.opts.MaxBytes > 0 && total > s.opts.MaxBytes)) {
			s.mu.Unlock()
			return
		}
		s.segs = s.segs[1:]
		s.mu.Unlock()
		// Searches that already opened the file keep reading it.
		if err := os.Remove(g.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("cannot remove expired segment", "file", g.path, "err", err)
		} else {
			s.log.Info("removed expired segment", "file", g.path, "records", g.last-g.first+1, "bytes", g.size)
		}
	}
}

// Close closes the active segment; Append fails afterwards.
func (s *Store) Close() error {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if err := s.active.Close(); err != nil {
		return fmt.Errorf("logstore: close %s: %w", s.active.Name(), err)
	}
	return nil
}
