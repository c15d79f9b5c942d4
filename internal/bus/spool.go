package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/vigil-hpc/vigil/internal/segfile"
)

// The spool keeps the messages of the logs, events and jobs streams on
// disk until the broker confirms them: segment files <dir>/<id>.seg of
// records, oldest first, and <dir>/state (acknowledged position and the
// streams' next sequence numbers). A record (docs/format/bus.md):
//
//	len u32 | crc32c u32 (of the payload) | payload
//	payload: stream u8 | seq u64 | key len u8 | key | body
//
// Beyond its byte bound the oldest segment goes, counted as dropped.

const (
	recHeader = 8
	// maxRecordBytes bounds one record (a log batch is cut well below).
	maxRecordBytes = 16 << 20
	stateSize      = 16 + 8*len(spooled)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// spooled are the streams kept in the spool, by their byte in a record.
var spooled = [...]string{StreamLogs, StreamEvents, StreamJobs}

func streamByte(s string) byte {
	for i, n := range spooled {
		if n == s {
			return byte(i)
		}
	}
	return 0
}

// pos is a place in the spool: a segment and a byte offset in it.
type pos struct {
	seg uint64
	off int64
}

func (p pos) before(q pos) bool { return p.seg < q.seg || p.seg == q.seg && p.off < q.off }

type segment struct {
	id    uint64
	f     *os.File
	size  int64
	count int // records
	acked int // records acknowledged
}

// record is one spooled message.
type record struct {
	stream string
	seq    uint64
	key    string
	body   []byte
	next   pos // the position after it
}

type spool struct {
	dir      string
	max      int64 // bytes
	segBytes int64

	mu      sync.Mutex
	segs    []*segment // oldest first; never empty after open
	total   int64
	ack     pos
	nextSeq [len(spooled)]uint64
	state   *os.File
	buf     []byte
	// notify has a value when a record was appended.
	notify chan struct{}
	// dropped is called with the stream and count of records dropped
	// unsent when the oldest segment went.
	dropped func(stream string, n int)
}

var errCorruptRecord = errors.New("bus spool: corrupt record")

// openSpool opens (or creates) the spool in dir, bounded to max bytes.
func openSpool(dir string, limit int64, dropped func(string, int)) (*spool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bus spool: %w", err)
	}
	s := &spool{dir: dir, max: limit, segBytes: min(limit/8, 64<<20), notify: make(chan struct{}, 1), dropped: dropped}
	s.segBytes = max(s.segBytes, 4096)
	ids, err := segfile.Numbered(dir, ".seg", 10)
	if err != nil {
		return nil, fmt.Errorf("bus spool: %w", err)
	}
	for i, id := range ids {
		seg, err := s.openSegment(id, i == len(ids)-1)
		if err != nil {
			s.close()
			return nil, err
		}
		s.segs = append(s.segs, seg)
		s.total += seg.size
	}
	if len(s.segs) == 0 {
		seg, err := s.openSegment(1, true)
		if err != nil {
			return nil, err
		}
		s.segs = append(s.segs, seg)
	}
	if s.state, err = os.OpenFile(filepath.Join(dir, "state"), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		s.close()
		return nil, fmt.Errorf("bus spool: %w", err)
	}
	var st [stateSize]byte
	if n, _ := s.state.ReadAt(st[:], 0); n == stateSize {
		s.ack = pos{binary.LittleEndian.Uint64(st[0:]), int64(binary.LittleEndian.Uint64(st[8:]))}
		for i := range s.nextSeq {
			s.nextSeq[i] = binary.LittleEndian.Uint64(st[16+8*i:])
		}
	}
	if first := s.segs[0]; s.ack.seg < first.id {
		s.ack = pos{first.id, 0}
	}
	if seg := s.find(s.ack.seg); seg == nil || s.ack.off > seg.size {
		s.ack = pos{s.segs[0].id, 0}
	}
	// Acknowledged records of the first segment are not counted as waiting.
	if seg := s.find(s.ack.seg); seg != nil {
		for _, sg := range s.segs {
			if sg.id < seg.id {
				sg.acked = sg.count
			}
		}
		p := pos{seg.id, 0}
		for p.before(s.ack) {
			r, err := s.readAt(seg, p)
			if err != nil {
				break
			}
			seg.acked++
			p = r.next
		}
	}
	for i := range s.nextSeq {
		s.nextSeq[i] = max(s.nextSeq[i], 1)
	}
	return s, nil
}

// openSegment opens a segment and counts its records; in the last one a
// torn or corrupt tail (a crash mid-write) is cut off.
func (s *spool) openSegment(id uint64, last bool) (*segment, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, strconv.FormatUint(id, 10)+".seg"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bus spool: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bus spool: %w", err)
	}
	seg := &segment{id: id, f: f, size: fi.Size()}
	p := pos{id, 0}
	for p.off < seg.size {
		r, err := s.readAt(seg, p)
		if err != nil {
			break
		}
		seg.count++
		if i := streamByte(r.stream); r.seq >= s.nextSeq[i] {
			s.nextSeq[i] = r.seq + 1
		}
		p = r.next
	}
	if p.off < seg.size {
		if !last {
			seg.size = p.off // the rest is unreadable; treat as its end
		} else if err := f.Truncate(p.off); err != nil {
			f.Close()
			return nil, fmt.Errorf("bus spool: cut torn tail: %w", err)
		}
		seg.size = p.off
	}
	return seg, nil
}

func (s *spool) find(id uint64) *segment {
	for _, seg := range s.segs {
		if seg.id == id {
			return seg
		}
	}
	return nil
}

// readAt reads the record at p of seg.
func (s *spool) readAt(seg *segment, p pos) (record, error) {
	var h [recHeader]byte
	if _, err := seg.f.ReadAt(h[:], p.off); err != nil {
		return record{}, err
	}
	n := int64(binary.LittleEndian.Uint32(h[:]))
	if n > maxRecordBytes || p.off+recHeader+n > seg.size {
		return record{}, errCorruptRecord
	}
	b := make([]byte, n)
	if _, err := seg.f.ReadAt(b, p.off+recHeader); err != nil {
		return record{}, err
	}
	if crc32.Checksum(b, castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return record{}, errCorruptRecord
	}
	r, err := parseRecord(b)
	r.next = pos{seg.id, p.off + recHeader + n}
	return r, err
}

// parseRecord decodes a record's payload.
func parseRecord(b []byte) (record, error) {
	if len(b) < 10 || int(b[0]) >= len(spooled) {
		return record{}, errCorruptRecord
	}
	kl := int(b[9])
	if len(b) < 10+kl {
		return record{}, errCorruptRecord
	}
	return record{stream: spooled[b[0]], seq: binary.LittleEndian.Uint64(b[1:]), key: string(b[10 : 10+kl]), body: b[10+kl:]}, nil
}

// append adds a message of stream and returns its sequence number. It
// writes to the file (no fsync: sync does that every second) and never
// waits for the broker.
func (s *spool) append(stream, key string, body []byte) (uint64, error) {
	if len(key) > 255 {
		key = key[:255]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := streamByte(stream)
	seq := s.nextSeq[i]
	b := s.buf[:0]
	b = append(b, make([]byte, recHeader)...)
	b = append(b, i)
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = append(b, byte(len(key)))
	b = append(b, key...)
	b = append(b, body...)
	if len(b)-recHeader > maxRecordBytes {
		return 0, fmt.Errorf("bus spool: record of %d bytes", len(b))
	}
	binary.LittleEndian.PutUint32(b, uint32(len(b)-recHeader))
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[recHeader:], castagnoli))
	s.buf = b
	tail := s.segs[len(s.segs)-1]
	if tail.size > 0 && tail.size+int64(len(b)) > s.segBytes {
		seg, err := s.openSegment(tail.id+1, true)
		if err != nil {
			return 0, err
		}
		s.segs = append(s.segs, seg)
		tail = seg
	}
	if _, err := tail.f.WriteAt(b, tail.size); err != nil {
		return 0, fmt.Errorf("bus spool: write: %w", err)
	}
	tail.size += int64(len(b))
	tail.count++
	s.total += int64(len(b))
	s.nextSeq[i]++
	s.writeState()
	for s.total > s.max && len(s.segs) > 1 {
		s.dropOldest()
	}
	select {
	case s.notify <- struct{}{}:
	default:
	}
	return seq, nil
}

// dropOldest removes the first segment, counting its unsent records.
func (s *spool) dropOldest() {
	seg := s.segs[0]
	if n := seg.count - seg.acked; n > 0 && s.dropped != nil {
		// Per stream, from the records themselves.
		p := pos{seg.id, 0}
		if s.ack.seg == seg.id {
			p = s.ack
		}
		for p.off < seg.size {
			r, err := s.readAt(seg, p)
			if err != nil {
				break
			}
			s.dropped(r.stream, 1)
			p = r.next
		}
	}
	seg.f.Close()
	os.Remove(seg.f.Name())
	s.total -= seg.size
	s.segs = s.segs[1:]
	if s.ack.seg <= seg.id {
		s.ack = pos{s.segs[0].id, 0}
		s.writeState()
	}
}

func (s *spool) writeState() {
	var st [stateSize]byte
	binary.LittleEndian.PutUint64(st[0:], s.ack.seg)
	binary.LittleEndian.PutUint64(st[8:], uint64(s.ack.off))
	for i, n := range s.nextSeq {
		binary.LittleEndian.PutUint64(st[16+8*i:], n)
	}
	s.state.WriteAt(st[:], 0) // an error shows at the next sync
}

// start is where unacknowledged records begin.
func (s *spool) start() pos {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ack
}

// next reads the record at p, skipping to the next segment at a
// segment's end; io.EOF when there is none yet. A p in a dropped segment
// moves to the oldest one kept.
func (s *spool) next(p pos) (record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.before(pos{s.segs[0].id, 0}) {
		p = pos{s.segs[0].id, 0}
	}
	for i, seg := range s.segs {
		if seg.id != p.seg {
			continue
		}
		if p.off >= seg.size {
			if i == len(s.segs)-1 {
				return record{}, io.EOF
			}
			p = pos{s.segs[i+1].id, 0}
			continue
		}
		r, err := s.readAt(seg, p)
		if err != nil {
			return record{}, fmt.Errorf("bus spool segment %d: %w", seg.id, err)
		}
		return r, nil
	}
	return record{}, io.EOF
}

// acked records that the record ending at next was confirmed; segments
// wholly confirmed (but the last) are deleted.
func (s *spool) acked(next pos) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ack.before(next) {
		return // in a dropped segment, or a resend
	}
	s.ack = next
	if seg := s.find(next.seg); seg != nil {
		seg.acked++
	}
	for len(s.segs) > 1 && s.segs[0].id < s.ack.seg {
		seg := s.segs[0]
		seg.f.Close()
		os.Remove(seg.f.Name())
		s.total -= seg.size
		s.segs = s.segs[1:]
	}
	if len(s.segs) == 1 && s.ack.off == s.segs[0].size && s.segs[0].size > s.segBytes/2 {
		// Everything confirmed: start a fresh segment rather than grow this one.
		if seg, err := s.openSegment(s.segs[0].id+1, true); err == nil {
			old := s.segs[0]
			old.f.Close()
			os.Remove(old.f.Name())
			s.total -= old.size
			s.segs = []*segment{seg}
			s.ack = pos{seg.id, 0}
		}
	}
	s.writeState()
}

// waiting is the number of records not yet confirmed, and the bytes the
// spool holds.
func (s *spool) waiting() (n int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seg := range s.segs {
		n += seg.count - seg.acked
	}
	return n, s.total
}

// sync flushes the tail segment and the state to disk.
func (s *spool) sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.segs[len(s.segs)-1].f.Sync(), s.state.Sync())
}

func (s *spool) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, seg := range s.segs {
		errs = append(errs, seg.f.Sync(), seg.f.Close())
	}
	if s.state != nil {
		errs = append(errs, s.state.Sync(), s.state.Close())
	}
	return errors.Join(errs...)
}
