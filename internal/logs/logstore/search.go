package logstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// snapshot copies the segment summaries; the active segment's blocks are
// copied because Append updates its last block in place.
func (s *Store) snapshot() []segment {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]segment, len(s.segs))
	for i, g := range s.segs {
		out[i] = *g
		if i == len(s.segs)-1 {
			out[i].blocks = slices.Clone(g.blocks)
		}
	}
	return out
}

// blockReader reads whole index blocks of one segment file.
type blockReader struct {
	f   *os.File
	buf []byte
	pos []int // offsets of matches in buf
}

// read loads [from, to) of the file.
func (br *blockReader) read(from, to int64) ([]byte, error) {
	n := int(to - from)
	if cap(br.buf) < n {
		br.buf = make([]byte, n)
	}
	b := br.buf[:n]
	if _, err := br.f.ReadAt(b, from); err != nil && !(errors.Is(err, io.EOF)) {
		return nil, fmt.Errorf("logstore: read %s: %w", br.f.Name(), err)
	}
	return b, nil
}

func blockEnd(g *segment, i int) int64 {
	if i+1 < len(g.blocks) {
		return g.blocks[i+1].off
	}
	return g.size
}

func openSegment(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // removed by retention meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("logstore: %w", err)
	}
	return f, nil
}

// Search returns up to limit records matching q, newest first, among those
// with a sequence number below before (0: no bound). next is the before of
// the following page, 0 when there is none. Memory is bounded by limit and
// one index block.
func (s *Store) Search(q Query, before uint64, limit int) (recs []Record, next uint64, err error) {
	if limit <= 0 {
		return nil, 0, nil
	}
	if before == 0 {
		before = ^uint64(0)
	}
	m := q.matcher()
	want := limit + 1
	snap := s.snapshot()
	var br blockReader
	var v view
	for i := len(snap) - 1; i >= 0 && len(recs) < want; i-- {
		g := &snap[i]
		if g.last < g.first || g.first >= before || !m.timeOverlaps(g.minTime(), g.maxTime()) {
			continue
		}
		f, err := openSegment(g.path)
		if err != nil {
			return nil, 0, err
		}
		if f == nil {
			continue
		}
		br.f = f
		for b := len(g.blocks) - 1; b >= 0 && len(recs) < want; b-- {
			blk := &g.blocks[b]
			if blk.seq >= before || !m.timeOverlaps(blk.min, blk.max) {
				continue
			}
			data, err := br.read(blk.off, blockEnd(g, b))
			if err != nil {
				f.Close()
				return nil, 0, err
			}
			br.pos = br.pos[:0]
			for p := 0; p < len(data); {
				n, err := nextRecord(data[p:], &v)
				if err != nil || n == 0 {
					f.Close()
					return nil, 0, fmt.Errorf("logstore: %s at offset %d: %w", g.path, blk.off+int64(p), errCorrupt)
				}
				if v.seq < before && m.match(&v) {
					br.pos = append(br.pos, p)
				}
				p += n
			}
			for j := len(br.pos) - 1; j >= 0 && len(recs) < want; j-- {
				_, _ = nextRecord(data[br.pos[j]:], &v)
				recs = append(recs, v.record())
			}
		}
		f.Close()
	}
	if len(recs) > limit {
		recs = recs[:limit]
		next = recs[limit-1].Seq
	}
	return recs, next, nil
}

// After returns up to limit records matching q with sequence numbers above
// after, oldest first. upTo is the sequence number to pass as after next
// time: the last record examined, so that following skips non-matching
// records already seen.
func (s *Store) After(after uint64, q Query, limit int) (recs []Record, upTo uint64, err error) {
	upTo = after
	if limit <= 0 {
		return nil, upTo, nil
	}
	m := q.matcher()
	snap := s.snapshot()
	var br blockReader
	var v view
	for i := range snap {
		g := &snap[i]
		if g.last < g.first || g.last <= after {
			continue
		}
		f, err := openSegment(g.path)
		if err != nil {
			return nil, upTo, err
		}
		if f == nil {
			continue
		}
		br.f = f
		for b := range g.blocks {
			if b+1 < len(g.blocks) && g.blocks[b+1].seq <= after+1 {
				continue
			}
			blk := &g.blocks[b]
			data, err := br.read(blk.off, blockEnd(g, b))
			if err != nil {
				f.Close()
				return nil, upTo, err
			}
			for p := 0; p < len(data); {
				n, err := nextRecord(data[p:], &v)
				if err != nil || n == 0 {
					f.Close()
					return nil, upTo, fmt.Errorf("logstore: %s at offset %d: %w", g.path, blk.off+int64(p), errCorrupt)
				}
				p += n
				if v.seq <= after {
					continue
				}
				upTo = v.seq
				if m.match(&v) {
					recs = append(recs, v.record())
					if len(recs) == limit {
						f.Close()
						return recs, upTo, nil
					}
				}
			}
		}
		f.Close()
	}
	return recs, upTo, nil
}
