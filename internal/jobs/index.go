package jobs

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// LogFile is the index's file in its directory (docs/format/jobs.md).
const LogFile = "jobs.log"

// maxRecord bounds one record (a 65,536-node job with its summary fits).
const maxRecord = 16 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Index is the job index: an append-only log of job records, the last
// record of a job winning, with a small in-memory entry per job (what
// List filters on and where the record is). Records are read back from
// the file (the page cache) for answers, so memory stays ~150 bytes a job.
// Safe for concurrent use.
type Index struct {
	dir string
	log *slog.Logger

	mu    sync.RWMutex
	f     *os.File
	size  int64 // end of the log
	live  int64 // bytes of the records that count
	byID  map[string]*entry
	order []*entry          // by when the index first learned of each job
	strs  map[string]string // user, partition and state strings, shared
	buf   []byte

	noSync bool // benchmarks that build big indexes
}

type entry struct {
	id        string
	user      string
	partition string
	state     State
	end       int64 // Unix ms; 0: not ended
	off       int64 // of the frame
	n         int32 // frame bytes
}

// Open opens (creating) the index in dir. A torn or corrupt tail (a crash
// mid-write) is moved aside to jobs.log.bad-OFFSET and the whole records
// before it are kept.
func Open(dir string, log *slog.Logger) (*Index, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("job index: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("job index: %w", err)
	}
	x := &Index{dir: dir, log: log, f: f, byID: map[string]*entry{}, strs: map[string]string{}}
	if err := x.load(); err != nil {
		f.Close()
		return nil, err
	}
	if x.needsCompaction(1 << 20) {
		if err := x.compact(); err != nil {
			log.Warn("job index: compaction failed; going on with the log as it is", "err", err)
		}
	}
	return x, nil
}

// intern shares repeated strings (users, partitions, nodes, states);
// x.mu held for writing, or the index not shared yet.
func (x *Index) intern(b []byte) string {
	if v, ok := x.strs[string(b)]; ok {
		return v
	}
	s := string(b)
	if len(x.strs) < 1<<20 {
		x.strs[s] = s
	}
	return s
}

func (x *Index) internString(s string) string {
	if v, ok := x.strs[s]; ok {
		return v
	}
	if len(x.strs) < 1<<20 {
		x.strs[s] = s
	}
	return s
}

// shared returns the interned copy of b if there is one; x.mu held for
// reading at least.
func (x *Index) shared(b []byte) string {
	if v, ok := x.strs[string(b)]; ok {
		return v
	}
	return string(b)
}

// load reads the log, keeping the last record of each job.
func (x *Index) load() error {
	name := x.f.Name()
	r := bufio.NewReaderSize(io.NewSectionReader(x.f, 0, 1<<62), 1<<20)
	var off int64
	var payload []byte
	for {
		n, err := binary.ReadUvarint(r)
		if err == io.EOF {
			break
		}
		hdr := int64(uvarintLen(n))
		var bad error
		switch {
		case err != nil:
			bad = err
		case n == 0 || n > maxRecord:
			bad = fmt.Errorf("record length %d, want 1..%d", n, maxRecord)
		default:
			if cap(payload) < int(n)+4 {
				payload = make([]byte, n+4)
			}
			payload = payload[:n+4]
			if _, err := io.ReadFull(r, payload); err != nil {
				bad = err
			} else if crc32.Checksum(payload[:n], castagnoli) != binary.LittleEndian.Uint32(payload[n:]) {
				bad = errors.New("checksum mismatch")
			}
		}
		var j *Job
		if bad == nil {
			j, bad = decodeJob(payload[:n], x.intern)
		}
		if bad != nil {
			return x.cutTail(off, fmt.Errorf("%s: record at byte %d: %w", name, off, bad))
		}
		x.note(j, off, int32(hdr+int64(n)+4))
		off += hdr + int64(n) + 4
	}
	x.size = off
	return nil
}

// cutTail moves what follows off aside, so nothing stored is destroyed,
// and truncates the log there.
func (x *Index) cutTail(off int64, why error) error {
	st, err := x.f.Stat()
	if err != nil {
		return err
	}
	aside := fmt.Sprintf("%s.bad-%d", x.f.Name(), off)
	out, err := os.Create(aside)
	if err != nil {
		return fmt.Errorf("job index: keep the unreadable tail: %w", err)
	}
	_, err = io.Copy(out, io.NewSectionReader(x.f, off, st.Size()-off))
	err = errors.Join(err, out.Sync(), out.Close())
	if err != nil {
		return fmt.Errorf("job index: keep the unreadable tail: %w", err)
	}
	if err := x.f.Truncate(off); err != nil {
		return fmt.Errorf("job index: %w", err)
	}
	x.size = off
	x.log.Warn("job index: unreadable tail moved aside (a crash mid-write?); the records before it are kept",
		"err", why, "bytes", st.Size()-off, "kept_in", aside)
	return x.f.Sync()
}

func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

// note records that j's latest record is the frame at off.
func (x *Index) note(j *Job, off int64, n int32) {
	e := x.byID[j.ID]
	if e == nil {
		e = &entry{id: j.ID}
		x.byID[j.ID] = e
		x.order = append(x.order, e)
	} else {
		x.live -= int64(e.n)
	}
	e.user, e.partition, e.state = x.internString(j.User), x.internString(j.Partition), State(x.internString(string(j.State)))
	e.end = 0
	if !j.End.IsZero() {
		e.end = j.End.UnixMilli()
	}
	e.off, e.n = off, n
	x.live += int64(n)
}

// frame appends j's frame to b.
func frame(b []byte, j *Job) ([]byte, error) {
	start := len(b)
	b = appendJob(b, j)
	n := len(b) - start
	if n > maxRecord {
		return nil, fmt.Errorf("job %s: record of %d bytes, more than %d", j.ID, n, maxRecord)
	}
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	b = append(b, hdr[:h]...)
	copy(b[start+h:], b[start:start+n])
	copy(b[start:], hdr[:h])
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start+h:start+h+n], castagnoli)), nil
}

// sanitize bounds what a source may store.
func sanitize(j *Job) error {
	if !ValidID(j.ID) {
		return fmt.Errorf("job id %q: want digits, optionally _TASK or +COMPONENT, at most %d bytes", j.ID, MaxIDLen)
	}
	if len(j.Nodes) > MaxNodes {
		return fmt.Errorf("job %s: %d nodes, more than %d", j.ID, len(j.Nodes), MaxNodes)
	}
	j.User, j.Account, j.Partition, j.Name = clip(j.User), clip(j.Account), clip(j.Partition), clip(j.Name)
	j.State = State(clip(string(j.State)))
	for i := range j.Nodes {
		j.Nodes[i] = clip(j.Nodes[i])
	}
	if s := j.Summary; s != nil {
		if len(s.PerNode) > MaxNodes || len(s.Stragglers) > MaxNodes {
			return fmt.Errorf("job %s: summary of more than %d nodes", j.ID, MaxNodes)
		}
		if len(s.Notes) > MaxNotes {
			s.Notes = s.Notes[:MaxNotes]
		}
		for i := range s.Notes {
			s.Notes[i] = clip(s.Notes[i])
		}
	}
	return nil
}

// Upsert stores j as the job's latest record. A job that is over (its
// State is Done) is on disk when Upsert returns (fsync).
func (x *Index) Upsert(j *Job) error {
	cp := *j
	if err := sanitize(&cp); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return errors.New("job index closed")
	}
	b, err := frame(x.buf[:0], &cp)
	if err != nil {
		return err
	}
	x.buf = b
	if _, err := x.f.WriteAt(b, x.size); err != nil {
		// Whatever got written is a torn tail: take it back.
		if terr := x.f.Truncate(x.size); terr != nil {
			err = errors.Join(err, terr)
		}
		return fmt.Errorf("job index: write: %w", err)
	}
	x.note(&cp, x.size, int32(len(b)))
	x.size += int64(len(b))
	if cp.State.Done() && !x.noSync {
		if err := x.f.Sync(); err != nil {
			return fmt.Errorf("job index: sync: %w", err)
		}
	}
	if x.needsCompaction(16 << 20) {
		if err := x.compact(); err != nil {
			x.log.Warn("job index: compaction failed; going on with the log as it is", "err", err)
		}
	}
	return nil
}

// needsCompaction says whether the log holds more than half as much
// again as its latest records, and at least minGarbage bytes more:
// records of a job before its last are garbage (a job gets 2-4: seen
// running, Slurm's word, ended, summary), so the log stays within 1.5
// times the jobs' size, each byte rewritten about twice.
func (x *Index) needsCompaction(minGarbage int64) bool {
	return x.size-x.live >= minGarbage && 2*x.size > 3*x.live
}

// read decodes e's record into a new Job; buf is scratch space; x.mu held.
func (x *Index) read(e *entry, buf *[]byte) (*Job, error) {
	if cap(*buf) < int(e.n) {
		*buf = make([]byte, max(int(e.n), 4096))
	}
	b := (*buf)[:e.n]
	if _, err := x.f.ReadAt(b, e.off); err != nil {
		return nil, fmt.Errorf("job index: read job %s: %w", e.id, err)
	}
	_, h := binary.Uvarint(b)
	if h <= 0 || int(e.n) < h+4 {
		return nil, fmt.Errorf("job index: job %s: bad frame", e.id)
	}
	p := b[h : len(b)-4]
	if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("job index: job %s: checksum mismatch at byte %d", e.id, e.off)
	}
	return decodeJob(p, x.shared)
}

// Get returns the job, or nil if the index does not know it.
func (x *Index) Get(id string) (*Job, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.byID[id]
	if e == nil || x.f == nil {
		return nil, nil
	}
	var buf []byte
	return x.read(e, &buf)
}

// Len is the number of jobs indexed.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.order)
}

// Size is the log's size in bytes.
func (x *Index) Size() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.size
}

// Match says whether a job of state st matches the filter's State:
// "ended" matches every job that is over, "running" the running ones,
// any other word itself.
func (f Filter) matchState(st State) bool {
	switch f.State {
	case "":
		return true
	case StateEnded:
		return st.Done()
	}
	return st == f.State
}

// List returns the jobs matching f, newest first (by when the index
// first learned of them), at most f.Limit (DefaultLimit if 0, capped at
// MaxLimit).
func (x *Index) List(f Filter) ([]*Job, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	var since int64
	if !f.Since.IsZero() {
		since = f.Since.UnixMilli()
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.f == nil {
		return nil, errors.New("job index closed")
	}
	var hits []*entry
	var buf []byte
	scanned := 0
	for i := len(x.order) - 1; i >= 0 && len(hits) < limit; i-- {
		e := x.order[i]
		if (f.User != "" && e.user != f.User) || (f.Partition != "" && e.partition != f.Partition) ||
			!f.matchState(e.state) || (since != 0 && e.end != 0 && e.end < since) {
			continue
		}
		if f.Node != "" {
			if scanned++; scanned > MaxNodeScan {
				break
			}
			j, err := x.read(e, &buf)
			if err != nil {
				return nil, err
			}
			if !slices.Contains(j.Nodes, f.Node) {
				continue
			}
		}
		hits = append(hits, e)
	}
	out := make([]*Job, 0, len(hits))
	for _, e := range hits {
		j, err := x.read(e, &buf)
		if err != nil {
			return out, err
		}
		out = append(out, j)
	}
	return out, nil
}

// compact rewrites the log with only the latest record of each job, in
// the same order, then replaces the old one; x.mu held (or not shared yet).
func (x *Index) compact() error {
	t0 := time.Now()
	tmp := filepath.Join(x.dir, LogFile+".tmp")
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	fail := func(err error) error { out.Close(); os.Remove(tmp); return err }
	w := bufio.NewWriterSize(out, 1<<20)
	offs := make([]int64, len(x.order))
	var off int64
	var b []byte
	for i, e := range x.order {
		b = append(b[:0], make([]byte, e.n)...)
		if _, err := x.f.ReadAt(b, e.off); err != nil {
			return fail(err)
		}
		if _, err := w.Write(b); err != nil {
			return fail(err)
		}
		offs[i] = off
		off += int64(e.n)
	}
	if err := errors.Join(w.Flush(), out.Sync()); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, filepath.Join(x.dir, LogFile)); err != nil {
		return fail(err)
	}
	if d, err := os.Open(x.dir); err == nil {
		d.Sync()
		d.Close()
	}
	x.f.Close()
	x.f = out
	for i, e := range x.order {
		e.off = offs[i]
	}
	x.log.Info("job index compacted", "jobs", len(x.order), "bytes_before", x.size, "bytes_after", off, "took", time.Since(t0))
	x.size, x.live = off, off
	return nil
}

// Close syncs and closes the log.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	err := errors.Join(x.f.Sync(), x.f.Close())
	x.f = nil
	return err
}
