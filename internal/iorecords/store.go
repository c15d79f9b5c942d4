// Package iorecords is the server's per-file I/O record store: the
// appio records (one file, one process, one interval) the tree sends,
// kept append-only in segment files under <data>/iorecords with
// retention by age and size, and queried for the top files and jobs by
// bytes, calls or time over a window, for everything or one job.
// docs/appio.md describes it, docs/format/appio.md the record.
package iorecords

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/maphash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/internal/logging"
	"github.com/vigil-hpc/vigil/internal/segfile"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/appio"
)

// Defaults of Options fields left zero.
const (
	DefaultRetention    = 30 * 24 * time.Hour
	DefaultMaxBytes     = 8 << 30
	DefaultSegmentBytes = 64 << 20
	DefaultSegmentSpan  = time.Hour
	// DefaultDedup covers at least 5 s of 100,000 records a second (50 s
	// of 10,000): resends come within a second or two of the first copy
	// (the acknowledgement interval per tree level), or after a restart,
	// first thing, against the tail read at start-up. At most 36 MB.
	DefaultDedup = 1 << 20
)

// maxRecordBytes bounds one stored record (four strings of at most 4 KiB
// and the counters), so a corrupt length is caught before it is read.
const maxRecordBytes = 24 << 10

// Options configure a Store.
type Options struct {
	Dir string // <data>/iorecords
	// Retention drops whole segments whose newest record is older.
	Retention time.Duration
	// MaxBytes bounds the segments on disk; beyond it the oldest go,
	// whole. The index in memory is 4 bytes a record besides, so it
	// bounds memory too (about 2 % of it).
	MaxBytes int64
	// SegmentBytes and SegmentSpan start a new segment beyond this size
	// or span of record times, so retention drops small pieces.
	SegmentBytes int64
	SegmentSpan  time.Duration
	// Dedup is how many of the latest records are remembered (by a
	// 64-bit hash, about 36 bytes each; at least half as many) to drop a
	// resent frame's records;
	// 0: DefaultDedup.
	Dedup      int
	Registerer prometheus.Registerer // nil: not registered
	Logger     *slog.Logger
	now        func() time.Time // tests
}

// Store keeps per-file I/O records on disk. Append and queries may run
// concurrently: queries read segments by position, and a segment retention
// removes is closed once the last query reading it is done.
type Store struct {
	o   Options
	log *slog.Logger

	mu     sync.RWMutex
	segs   []*segment // oldest first; the last is appended to
	bytes  int64
	closed bool
	buf    []byte // Append's encoding scratch

	// seen holds the hashes (seeded per process) of the latest records
	// stored, to recognise a frame sent again.
	seed maphash.Seed
	seen dedup

	appended, refused, removed, outOfRange, duplicates prometheus.Counter
	recordsG, bytesG                                   prometheus.GaugeFunc
	// warned logs a failed write or out-of-range records once per kind
	// (under mu).
	warned logging.OnChange
}

// maxAhead bounds how far ahead of the server's clock a record may end
// (as the store's max_future): a wrong clock must not start segments that
// retention by age never reaches.
const maxAhead = 10 * time.Minute

// segment is one file of records in arrival order, indexed by job.
type segment struct {
	seq        uint64
	path       string
	f          *os.File
	size       int64
	n          int
	minT, maxT int64 // record starts and ends, Unix ns
	// jobs holds, per job, the offsets of its records: a job's top files
	// read only its records.
	jobs map[string][]uint32
	refs int  // queries reading it (under Store.mu)
	dead bool // removed; closed when refs drops to 0
}

// Open opens or creates the store in o.Dir, reading every segment to
// rebuild the index; a torn record at the end of the newest segment (a
// crash mid-write) is cut off.
func Open(o Options) (*Store, error) {
	if o.Dir == "" {
		return nil, errors.New("iorecords: no directory")
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	// Offsets in the index are 32 bits: a segment stays well below 4 GiB.
	o.SegmentBytes = min(o.SegmentBytes, 1<<30)
	if o.SegmentSpan <= 0 {
		o.SegmentSpan = DefaultSegmentSpan
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create io record directory: %w", err)
	}
	s := &Store{o: o, log: o.Logger, seed: maphash.MakeSeed(), seen: newDedup(o.Dedup)}
	seqs, err := segfile.Numbered(o.Dir, ".iorec", 10)
	if err != nil {
		return nil, fmt.Errorf("io records: %w", err)
	}
	for i, seq := range seqs {
		sg, err := s.load(seq, i == len(seqs)-1)
		if err != nil {
			s.closeAll()
			return nil, err
		}
		s.segs = append(s.segs, sg)
		s.bytes += sg.size
	}
	s.metrics()
	s.mu.Lock()
	s.retain()
	s.mu.Unlock()
	return s, nil
}

func (s *Store) metrics() {
	f := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	s.appended = f("vigil_iorecords_appended_total", "Per-file I/O records stored.")
	s.refused = f("vigil_iorecords_refused_total", "Per-file I/O records not stored: the write failed (the sender sends them again).")
	s.removed = f("vigil_iorecords_segments_removed_total", "Segments of per-file I/O records removed by retention (age or size).")
	s.duplicates = f("vigil_iorecords_duplicates_total", "Per-file I/O records received again (a frame resent after a lost acknowledgement) and not stored twice.")
	s.outOfRange = f("vigil_iorecords_out_of_range_total", "Per-file I/O records dropped: ending more than 10 minutes ahead of the server's clock, or older than the retention.")
	s.bytesG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_iorecords_bytes", Help: "Bytes of per-file I/O records on disk."},
		func() float64 { s.mu.RLock(); defer s.mu.RUnlock(); return float64(s.bytes) })
	s.recordsG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vigil_iorecords_records", Help: "Per-file I/O records kept."},
		func() float64 {
			s.mu.RLock()
			defer s.mu.RUnlock()
			n := 0
			for _, sg := range s.segs {
				n += sg.n
			}
			return float64(n)
		})
	if r := s.o.Registerer; r != nil {
		for _, c := range []prometheus.Collector{s.appended, s.refused, s.removed, s.outOfRange, s.duplicates, s.bytesG, s.recordsG} {
			_ = r.Register(c)
		}
	}
}

func (s *Store) segPath(seq uint64) string {
	return filepath.Join(s.o.Dir, fmt.Sprintf("%016d.iorec", seq))
}

// load reads a segment and indexes it. In the newest segment (last) a bad
// record and all after it are cut off; in an older one reading stops
// there (logged), keeping what came before.
func (s *Store) load(seq uint64, last bool) (*segment, error) {
	path := s.segPath(seq)
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, fmt.Errorf("open io record segment: %w", err)
	}
	sg := &segment{seq: seq, path: path, f: f, jobs: map[string][]uint32{}}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read io record segment %s: %w", path, err)
	}
	off := 0
	var r rawRecord
	for off < len(data) {
		n, err := parseStored(data[off:], &r)
		if err != nil {
			if last {
				s.log.Warn("cutting a torn io record segment", "file", path, "offset", off, "err", err)
				if terr := f.Truncate(int64(off)); terr != nil {
					f.Close()
					return nil, fmt.Errorf("cut io record segment %s: %w", path, terr)
				}
			} else {
				s.log.Warn("io record segment damaged: reading stops there", "file", path, "offset", off, "err", err)
			}
			break
		}
		sg.index(uint32(off), r.start, r.end, r.job)
		s.seen.add(maphash.Bytes(s.seed, data[off+storedHead:off+n]))
		off += n
	}
	sg.size = int64(off)
	return sg, nil
}

func (sg *segment) index(off uint32, start, end int64, job []byte) {
	if sg.n == 0 || start < sg.minT {
		sg.minT = start
	}
	if sg.n == 0 || end > sg.maxT {
		sg.maxT = end
	}
	sg.n++
	offs, ok := sg.jobs[string(job)]
	if !ok {
		sg.jobs[string(job)] = []uint32{off}
		return
	}
	sg.jobs[string(job)] = append(offs, off)
}

// Append stores recs (written before it returns; fsynced when a segment
// is finished and at Close). An error means none or only some were
// written; the caller's sender sends them again.
func (s *Store) Append(recs []appio.FileRecord) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("io record store closed")
	}
	// Records out of the kept range go, counted (the sender's clock).
	now := s.o.now()
	lo, hi := now.Add(-s.o.Retention).UnixNano(), now.Add(maxAhead).UnixNano()
	bad := 0
	for i := range recs {
		if recs[i].End > hi || recs[i].End < lo {
			bad++
		}
	}
	if bad > 0 {
		kept := make([]appio.FileRecord, 0, len(recs)-bad)
		for i := range recs {
			if recs[i].End <= hi && recs[i].End >= lo {
				kept = append(kept, recs[i])
			}
		}
		s.outOfRange.Add(float64(bad))
		s.warned.Warn(s.log, "dropping io records out of range (a node's clock?)",
			fmt.Errorf("%d records from %s ending outside %s..%s", bad, recs[0].Node, time.Unix(0, lo).UTC().Format(time.RFC3339), time.Unix(0, hi).UTC().Format(time.RFC3339)))
		if recs = kept; len(recs) == 0 {
			return nil
		}
	}
	sg, err := s.current(recs[0].Start)
	if err != nil {
		s.refused.Add(float64(len(recs)))
		return err
	}
	// A frame the sender did not see acknowledged (the connection or this
	// server went down first) comes again: its records are recognised by
	// their content among the latest stored and not stored twice.
	buf := s.buf[:0]
	offs := make([]uint32, 0, len(recs))
	idx := make([]int, 0, len(recs))
	hashes := make([]uint64, 0, len(recs))
	var batch map[uint64]struct{}
	if len(recs) > 16 {
		batch = make(map[uint64]struct{}, len(recs))
	}
	dups := 0
	for i := range recs {
		at := len(buf)
		buf = appendStored(buf, &recs[i])
		h := maphash.Bytes(s.seed, buf[at+storedHead:])
		_, inBatch := batch[h]
		if s.seen.has(h) || inBatch || batch == nil && slices.Contains(hashes, h) {
			buf = buf[:at]
			dups++
			continue
		}
		if batch != nil {
			batch[h] = struct{}{}
		}
		offs = append(offs, uint32(sg.size+int64(at)))
		idx = append(idx, i)
		hashes = append(hashes, h)
	}
	s.buf = buf
	if dups > 0 {
		s.duplicates.Add(float64(dups))
	}
	if len(buf) == 0 {
		return nil
	}
	if _, err := sg.f.WriteAt(buf, sg.size); err != nil {
		s.refused.Add(float64(len(recs)))
		err = fmt.Errorf("write io records: %w", err)
		s.warned.Warn(s.log, "cannot store io records; the senders send them again", err)
		return err
	}
	for k, off := range offs {
		r := &recs[idx[k]]
		sg.index(off, r.Start, r.End, []byte(r.JobID))
		s.seen.add(hashes[k])
	}
	sg.size += int64(len(buf))
	s.bytes += int64(len(buf))
	s.appended.Add(float64(len(offs)))
	if len(buf) > 1<<20 {
		s.buf = nil // a one-off big batch
	}
	s.retain()
	return nil
}

// current returns the segment to append to, starting a new one when the
// last is full or spans too long.
func (s *Store) current(t int64) (*segment, error) {
	if n := len(s.segs); n > 0 {
		sg := s.segs[n-1]
		if sg.size < s.o.SegmentBytes && (sg.n == 0 || t-sg.minT < int64(s.o.SegmentSpan) && sg.maxT-t < int64(s.o.SegmentSpan)) {
			return sg, nil
		}
		if err := sg.f.Sync(); err != nil {
			s.log.Warn("fsync io record segment", "file", sg.path, "err", err)
		}
	}
	seq := uint64(1)
	if n := len(s.segs); n > 0 {
		seq = s.segs[n-1].seq + 1
	}
	path := s.segPath(seq)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create io record segment: %w", err)
	}
	sg := &segment{seq: seq, path: path, f: f, jobs: map[string][]uint32{}}
	s.segs = append(s.segs, sg)
	return sg, nil
}

// retain removes the segments past the retention or the size bound
// (never the one being appended to). Called with mu held.
func (s *Store) retain() {
	cutoff := s.o.now().Add(-s.o.Retention).UnixNano()
	for len(s.segs) > 1 {
		sg := s.segs[0]
		if sg.maxT >= cutoff && s.bytes <= s.o.MaxBytes {
			break
		}
		s.segs = s.segs[1:]
		s.bytes -= sg.size
		sg.dead = true
		if err := os.Remove(sg.path); err != nil {
			s.log.Warn("remove io record segment", "file", sg.path, "err", err)
		}
		if sg.refs == 0 {
			sg.f.Close()
		}
		s.removed.Inc()
	}
}

// Retain applies the retention now (the server calls it periodically, as
// Append does on every batch).
func (s *Store) Retain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.retain()
	}
}

// Close syncs and closes the segments.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if n := len(s.segs); n > 0 {
		err = s.segs[n-1].f.Sync()
	}
	s.closeAll()
	return err
}

func (s *Store) closeAll() {
	for _, sg := range s.segs {
		if sg.refs == 0 {
			sg.f.Close()
		}
		sg.dead = true
	}
}

// acquire returns the segments overlapping [start, end], held open until
// release, with their size and, for job, its record offsets as they are
// now (appends after it are not seen).
func (s *Store) acquire(start, end int64, job string, byJob bool) []view {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vs []view
	for _, sg := range s.segs {
		if sg.n == 0 || sg.maxT < start || sg.minT > end {
			continue
		}
		v := view{sg: sg, size: sg.size}
		if byJob {
			v.offs = sg.jobs[job]
			if len(v.offs) == 0 {
				continue
			}
			v.offs = v.offs[:len(v.offs):len(v.offs)]
		}
		sg.refs++
		vs = append(vs, v)
	}
	return vs
}

func (s *Store) release(vs []view) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vs {
		v.sg.refs--
		if v.sg.dead && v.sg.refs == 0 {
			v.sg.f.Close()
		}
	}
}

type view struct {
	sg   *segment
	size int64
	offs []uint32
}

// Stored record: u32 length of the body, u32 CRC-32C of the body, body:
// start varint, duration uvarint, then node, job, exe, path, mount point,
// fstype as uvarint-length strings, pid, uid uvarint, rank varint, the 36
// counters uvarint. docs/format/appio.md.
const storedHead = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendStored(dst []byte, r *appio.FileRecord) []byte {
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.AppendVarint(dst, r.Start)
	dst = binary.AppendUvarint(dst, uint64(max(r.End-r.Start, 0)))
	for _, str := range [...]string{r.Node, r.JobID, r.Exe, r.Path, r.MountPoint, r.FSType} {
		if len(str) > appio.MaxString {
			str = str[:appio.MaxString]
		}
		dst = binary.AppendUvarint(dst, uint64(len(str)))
		dst = append(dst, str...)
	}
	dst = binary.AppendUvarint(dst, uint64(r.PID))
	dst = binary.AppendUvarint(dst, uint64(r.UID))
	dst = binary.AppendVarint(dst, int64(r.Rank))
	for _, c := range r.Counters {
		dst = binary.AppendUvarint(dst, c)
	}
	body := dst[at+storedHead:]
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(body)))
	binary.LittleEndian.PutUint32(dst[at+4:], crc32.Checksum(body, castagnoli))
	return dst
}

var errCorrupt = errors.New("corrupt io record")

// rawRecord is a stored record decoded without copying its strings: they
// point into the buffer read.
type rawRecord struct {
	start, end                         int64
	node, job, exe, path, mount, fstyp []byte
	pid, uid                           uint32
	rank                               int32
	c                                  [appio.NCounters]uint64
}

// parseStored decodes the record at the start of b, returning its size.
func parseStored(b []byte, r *rawRecord) (int, error) {
	if len(b) < storedHead {
		return 0, fmt.Errorf("%w: %d bytes left", errCorrupt, len(b))
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n > maxRecordBytes || n > len(b)-storedHead {
		return 0, fmt.Errorf("%w: length %d", errCorrupt, n)
	}
	body := b[storedHead : storedHead+n]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, fmt.Errorf("%w: checksum", errCorrupt)
	}
	p := body
	bad := false
	uv := func() uint64 {
		v, k := binary.Uvarint(p)
		if k <= 0 {
			bad = true
			return 0
		}
		p = p[k:]
		return v
	}
	sv := func() int64 { u := uv(); return int64(u>>1) ^ -int64(u&1) }
	str := func() []byte {
		l := uv()
		if l > uint64(len(p)) {
			bad = true
			return nil
		}
		s := p[:l]
		p = p[l:]
		return s
	}
	r.start = sv()
	r.end = r.start + int64(uv())
	r.node, r.job, r.exe, r.path, r.mount, r.fstyp = str(), str(), str(), str(), str(), str()
	r.pid, r.uid, r.rank = uint32(uv()), uint32(uv()), int32(sv())
	for i := range r.c {
		r.c[i] = uv()
	}
	if bad || len(p) != 0 {
		return 0, fmt.Errorf("%w: body", errCorrupt)
	}
	return storedHead + n, nil
}

// RetainEvery applies the retention every interval until ctx ends, so
// records age out while none arrive.
func (s *Store) RetainEvery(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Retain()
		}
	}
}

// dedup remembers the hashes of the latest n/2 to n records in two
// generations: when the current one holds n/2, it becomes the previous
// and the one before is let go. Nothing is deleted one by one (a map
// churned by deletes probes ever longer).
type dedup struct {
	cur, prev map[uint64]struct{}
	half      int
}

func newDedup(n int) dedup {
	if n <= 0 {
		n = DefaultDedup
	}
	return dedup{cur: make(map[uint64]struct{}), half: max(n/2, 1)}
}

func (d *dedup) has(h uint64) bool {
	if _, ok := d.cur[h]; ok {
		return true
	}
	_, ok := d.prev[h]
	return ok
}

func (d *dedup) add(h uint64) {
	if len(d.cur) >= d.half {
		d.prev, d.cur = d.cur, make(map[uint64]struct{}, d.half)
	}
	d.cur[h] = struct{}{}
}
