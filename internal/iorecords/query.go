package iorecords

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
)

// By is what top lists rank by.
type By string

// Rankings of a top list.
const (
	ByBytes By = "bytes" // bytes read + written
	ByCalls By = "calls" // read, write and metadata calls
	ByTime  By = "time"  // time in read, write and metadata calls
)

// ParseBy checks a ranking name ("" is bytes).
func ParseBy(s string) (By, error) {
	switch By(s) {
	case "":
		return ByBytes, nil
	case ByBytes, ByCalls, ByTime:
		return By(s), nil
	}
	return "", fmt.Errorf("by %q: want bytes, calls or time", s)
}

// Query selects records whose interval ends in (Start, End] (so an
// interval is counted in one window of consecutive ones), for one job if
// Job is set.
type Query struct {
	Start, End time.Time
	Job        string
	HasJob     bool // Job is set (the empty job id is a job too: no job)
	By         By
	Limit      int // entries of each list; 0: 20
	// MaxRecords bounds the records read (0: no bound); a query reaching
	// it fails with ErrTooMany.
	MaxRecords int
}

// ErrTooMany is a query that would read more than its MaxRecords.
var ErrTooMany = errors.New("query reads too many io records")

// Totals are the sums of a file's or job's records.
type Totals struct {
	Records  int
	Counters [appio.NCounters]uint64
	First    int64               // earliest start, Unix ns
	Last     int64               // latest end
	pids     map[uint32]struct{} // distinct processes, up to maxPIDs
	nodes    map[string]struct{} // jobs: distinct nodes, up to maxPIDs
}

// maxPIDs bounds the distinct processes (and nodes) counted per entry.
const maxPIDs = 4096

// File is one file of a job on a node, its records summed.
type File struct {
	Node, Job, Path, MountPoint, FSType string
	UID                                 uint32
	Totals
}

// Job is one job's records summed over its files.
type Job struct {
	Job   string
	Files int
	Totals
}

// Result is a top query's answer.
type Result struct {
	Files []File
	Jobs  []Job
	// Records is how many records were summed.
	Records int
	// FilesCapped: more than 100,000 distinct files were in the window;
	// the file list ranks the first 100,000 seen.
	FilesCapped bool
}

// Value is t's measure for a ranking.
func (t *Totals) Value(by By) uint64 {
	c := &t.Counters
	switch by {
	case ByCalls:
		return c[appio.Opens] + c[appio.Closes] + c[appio.Reads] + c[appio.Writes] + c[appio.Seeks] + c[appio.Syncs] +
			c[appio.Stats] + c[appio.Mmaps] + c[appio.MetaOther]
	case ByTime:
		return c[appio.ReadNS] + c[appio.WriteNS] + c[appio.MetaNS]
	}
	return c[appio.BytesRead] + c[appio.BytesWritten]
}

// Processes is the number of distinct processes (capped at 4,096).
func (t *Totals) Processes() int { return len(t.pids) }

// Nodes is the number of distinct nodes of a job (capped at 4,096).
func (t *Totals) Nodes() int { return len(t.nodes) }

func (t *Totals) add(r *rawRecord) {
	if t.Records == 0 || r.start < t.First {
		t.First = r.start
	}
	t.Last = max(t.Last, r.end)
	t.Records++
	for i, v := range r.c {
		if s := t.Counters[i] + v; s >= v {
			t.Counters[i] = s
		} else {
			t.Counters[i] = ^uint64(0)
		}
	}
	if len(t.pids) < maxPIDs {
		if t.pids == nil {
			t.pids = map[uint32]struct{}{}
		}
		t.pids[r.pid] = struct{}{}
	}
}

// maxEntries bounds the distinct files a query sums: beyond it further
// files are left out of the file list (their jobs still count them), so a
// query's memory stays under about 100 MB.
const maxEntries = 100_000

// sum adds up the records of q's window by file and by job, unranked.
func (s *Store) sum(ctx context.Context, q Query) (*Result, error) {
	start, end := q.Start.UnixNano(), q.End.UnixNano()
	vs := s.acquire(start, end, q.Job, q.HasJob)
	defer s.release(vs)
	files := map[string]*File{}
	jobs := map[string]*Job{}
	var key []byte
	res := &Result{}
	add := func(r *rawRecord) error {
		if r.end <= start || r.end > end || q.HasJob && string(r.job) != q.Job {
			return nil
		}
		res.Records++
		if q.MaxRecords > 0 && res.Records > q.MaxRecords {
			return fmt.Errorf("%w: more than %d; narrow the window or name a job", ErrTooMany, q.MaxRecords)
		}
		j := jobs[string(r.job)]
		if j == nil {
			j = &Job{Job: string(r.job)}
			jobs[j.Job] = j
		}
		j.add(r)
		if len(j.nodes) < maxPIDs {
			if j.nodes == nil {
				j.nodes = map[string]struct{}{}
			}
			if _, ok := j.nodes[string(r.node)]; !ok {
				j.nodes[string(r.node)] = struct{}{}
			}
		}
		key = append(append(append(append(key[:0], r.job...), 0), r.node...), 0)
		key = append(key, r.path...)
		f := files[string(key)]
		if f == nil {
			if len(files) >= maxEntries {
				res.FilesCapped = true
				return nil
			}
			f = &File{Node: string(r.node), Job: j.Job, Path: string(r.path), MountPoint: string(r.mount),
				FSType: string(r.fstyp), UID: r.uid}
			files[string(key)] = f
			j.Files++
		}
		f.add(r)
		return nil
	}
	var r rawRecord
	buf := make([]byte, 0, 1<<20)
	for _, v := range vs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if q.HasJob {
			if err := readAt(ctx, v, &r, &buf, add); err != nil {
				return nil, err
			}
			continue
		}
		if err := scan(ctx, v, &r, &buf, add); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		res.Files = append(res.Files, *f)
	}
	for _, j := range jobs {
		res.Jobs = append(res.Jobs, *j)
	}
	return res, nil
}

// Top sums the records of q's window by file (job, node, path) and by job
// and returns each ranked by q.By, the largest first, at most q.Limit.
func (s *Store) Top(ctx context.Context, q Query) (*Result, error) {
	if q.By == "" {
		q.By = ByBytes
	}
	if q.Limit <= 0 {
		q.Limit = 20
	}
	res, err := s.sum(ctx, q)
	if err != nil {
		return nil, err
	}
	res.Files = RankFiles(res.Files, q.By, q.Limit)
	slices.SortFunc(res.Jobs, func(a, b Job) int {
		return cmp.Or(cmp.Compare(b.Value(q.By), a.Value(q.By)), strings.Compare(a.Job, b.Job))
	})
	res.Jobs = res.Jobs[:min(len(res.Jobs), q.Limit)]
	return res, nil
}

// JobFiles sums one job's records over start..end once and ranks its
// files by each measure, at most limit each: the job report's lists.
func (s *Store) JobFiles(ctx context.Context, job string, start, end time.Time, limit int) (map[By][]File, error) {
	res, err := s.sum(ctx, Query{Start: start, End: end, Job: job, HasJob: true})
	if err != nil {
		return nil, err
	}
	out := map[By][]File{}
	for _, by := range []By{ByBytes, ByCalls, ByTime} {
		out[by] = RankFiles(slices.Clone(res.Files), by, limit)
	}
	return out, nil
}

// RankFiles sorts fs by the measure, the largest first (then by job, node
// and path), and keeps the first limit.
func RankFiles(fs []File, by By, limit int) []File {
	slices.SortFunc(fs, func(a, b File) int {
		return cmp.Or(cmp.Compare(b.Value(by), a.Value(by)), strings.Compare(a.Job, b.Job),
			strings.Compare(a.Node, b.Node), strings.Compare(a.Path, b.Path))
	})
	return fs[:min(len(fs), limit)]
}

// scan reads a whole segment (up to the size it had) in 1 MiB pieces.
func scan(ctx context.Context, v view, r *rawRecord, buf *[]byte, f func(*rawRecord) error) error {
	var off int64
	b := (*buf)[:0]
	pending := 0 // bytes of b not yet parsed, at its start
	for off < v.size || pending > 0 {
		if off < v.size {
			b = b[:cap(b)]
			n, err := v.sg.f.ReadAt(b[pending:min(int64(len(b)), int64(pending)+v.size-off)], off)
			if n == 0 && err != nil {
				return fmt.Errorf("read io records: %w", err)
			}
			off += int64(n)
			b = b[:pending+n]
		}
		p := 0
		for p < len(b) {
			n, err := parseStored(b[p:], r)
			if err != nil {
				if off < v.size && len(b)-p < maxRecordBytes+storedHead {
					break // the rest of the record is in the next read
				}
				return fmt.Errorf("io records %s at %d: %w", v.sg.path, off-int64(len(b)-p), err)
			}
			if err := f(r); err != nil {
				return err
			}
			p += n
		}
		pending = copy(b, b[p:])
		if off >= v.size && pending > 0 && p == 0 {
			return fmt.Errorf("io records %s: torn record at the end", v.sg.path)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	*buf = b
	return nil
}

// readAt reads the records at v's offsets (one job's), one read for each
// run of records close together.
func readAt(ctx context.Context, v view, r *rawRecord, buf *[]byte, f func(*rawRecord) error) error {
	b := *buf
	for i := 0; i < len(v.offs); {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Read from this record through the last one within 1 MiB, and
		// a little past it (a record is usually under 512 bytes; a longer
		// one is read again on its own).
		base := int64(v.offs[i])
		j := i + 1
		for j < len(v.offs) && int64(v.offs[j])-base < int64(cap(b))-maxRecordBytes-storedHead {
			j++
		}
		lim := min(int64(v.offs[j-1])+512, v.size)
		if lim-base > int64(cap(b)) {
			b = make([]byte, lim-base)
		}
		b = b[:lim-base]
		n, err := v.sg.f.ReadAt(b, base)
		if n < len(b) {
			return fmt.Errorf("read io records %s at %d: %w", v.sg.path, base, err)
		}
		start := i
		for i < j {
			if err := ctx.Err(); err != nil {
				return err
			}
			off := int64(v.offs[i]) - base
			_, err := parseStored(b[off:], r)
			if err != nil {
				if i > start {
					break // cut by the read: read again from it
				}
				// The first record is longer than read: read it whole.
				one := make([]byte, min(int64(maxRecordBytes+storedHead), v.size-base))
				if n, rerr := v.sg.f.ReadAt(one, base); n < len(one) {
					return fmt.Errorf("read io records %s at %d: %w", v.sg.path, base, rerr)
				}
				if _, err := parseStored(one, r); err != nil {
					return fmt.Errorf("io records %s at %d: %w", v.sg.path, v.offs[i], err)
				}
			}
			if err := f(r); err != nil {
				return err
			}
			i++
		}
	}
	*buf = b
	return nil
}
