package iofs

import (
	"sync"

	"github.com/vigil-hpc/vigil/internal/appio"
)

// Counter indices, in the order of the appio contract (docs/format/appio.md).
const (
	cOpens = iota
	cCloses
	cReads
	cWrites
	cBytesRead
	cBytesWritten
	cReadNs
	cWriteNs
	cMetaNs
	cSeeks
	cSyncs
	cStats
	cMmaps
	cMetaOther
	cSeq
	cRandom
	cReadHist       // 10 buckets
	cWriteHist = 26 // 10 buckets

	// NumCounters is the number of u64 counters of a record.
	NumCounters = 36
)

// Counters are one (file, pid) pair's deltas over an interval.
type Counters [NumCounters]uint64

// sizeBucket is the histogram bucket of an access of n bytes, with
// sizeBucket is the access-size bucket of n bytes: Darshan's bounds with
// inclusive upper bounds and K = 1024, as every appio reporter counts them.
func sizeBucket(n uint64) int {
	for i, b := range appio.BucketBounds {
		if n <= b {
			return i
		}
	}
	return appio.NBuckets - 1
}

// file is one path seen through the mount. Handles point at it while
// they are open; the table forgets it once no handle does and it has been
// idle for an interval, so the table is bounded by MaxFiles.
type file struct {
	path string // absolute, under the mount point; "" for the fold
	refs int    // open handles
	used uint64 // last interval generation that counted on it
}

type pairKey struct {
	f   *file
	pid uint32
}

// Record is one (file, pid) pair's deltas, as handed to the reporter.
// Path "" is the fold of files beyond the table (file_id 0).
type Record struct {
	Path string
	Pid  uint32
	C    Counters
}

// Limits bound the table.
type Limits struct {
	MaxFiles int // paths known at once (open or counted this interval)
	MaxPairs int // (file, pid) pairs counted per interval
}

// foldPids is how many per-pid fold records (file_id 0) an interval keeps
// beyond MaxPairs before everything goes to the fold of pid 0.
const foldPids = 64

// Table accumulates the counters of the current interval. It is safe for
// concurrent use: every FUSE request takes its mutex once, which costs far
// less than the request's round trip through the kernel.
type Table struct {
	mu     sync.Mutex
	lim    Limits
	files  map[string]*file
	pairs  map[pairKey]*Counters
	free   []*Counters
	other  file
	gen    uint64
	folded uint64 // operations counted in the fold because a table was full
}

// NewTable returns an empty table; zero limits get defaults.
func NewTable(lim Limits) *Table {
	if lim.MaxFiles <= 0 {
		lim.MaxFiles = 16384
	}
	if lim.MaxPairs <= 0 {
		lim.MaxPairs = 4096
	}
	return &Table{lim: lim, files: make(map[string]*file), pairs: make(map[pairKey]*Counters)}
}

// acquire returns the file for path with one more reference (an open
// handle), or the fold when the table is full.
func (t *Table) acquire(path string) *file {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.lookupLocked(path)
	f.refs++
	return f
}

// release drops a handle's reference.
func (t *Table) release(f *file) {
	t.mu.Lock()
	f.refs--
	t.mu.Unlock()
}

func (t *Table) lookupLocked(path string) *file {
	if f := t.files[path]; f != nil {
		return f
	}
	if len(t.files) >= t.lim.MaxFiles {
		t.folded++
		return &t.other
	}
	f := &file{path: path, used: t.gen}
	t.files[path] = f
	return f
}

// slotLocked returns the counters of (f, pid) for this interval. Beyond
// MaxPairs pairs, counts go to the pid's fold record, and beyond a few
// more to the fold of pid 0: memory stays bounded whatever the load.
func (t *Table) slotLocked(f *file, pid uint32) *Counters {
	k := pairKey{f, pid}
	if c := t.pairs[k]; c != nil {
		return c
	}
	if len(t.pairs) >= t.lim.MaxPairs {
		t.folded++
		k.f = &t.other
		if c := t.pairs[k]; c != nil {
			return c
		}
		if len(t.pairs) >= t.lim.MaxPairs+foldPids {
			k.pid = 0
			if c := t.pairs[k]; c != nil {
				return c
			}
		}
	}
	var c *Counters
	if n := len(t.free); n > 0 {
		c, t.free = t.free[n-1], t.free[:n-1]
	} else {
		c = new(Counters)
	}
	k.f.used = t.gen
	t.pairs[k] = c
	return c
}

// access counts a read or write of n bytes at off that took ns, and
// whether it continued where the handle's previous access ended.
func (t *Table) access(h *handle, pid uint32, write bool, off int64, n int, ns int64) {
	t.mu.Lock()
	c := t.slotLocked(h.f, pid)
	b := sizeBucket(uint64(n))
	if write {
		c[cWrites]++
		c[cBytesWritten] += uint64(n)
		c[cWriteNs] += uint64(ns)
		c[cWriteHist+b]++
	} else {
		c[cReads]++
		c[cBytesRead] += uint64(n)
		c[cReadNs] += uint64(ns)
		c[cReadHist+b]++
	}
	switch {
	case h.lastEnd < 0: // the handle's first access is neither
	case h.lastEnd == off:
		c[cSeq]++
	default:
		c[cRandom]++
	}
	h.lastEnd = off + int64(n)
	t.mu.Unlock()
}

// op counts one call of counter idx that took ns of metadata time.
func (t *Table) op(f *file, pid uint32, idx int, ns int64) {
	t.mu.Lock()
	c := t.slotLocked(f, pid)
	c[idx]++
	c[cMetaNs] += uint64(ns)
	t.mu.Unlock()
}

// opPath is op for a path with no open handle (stat, rename, unlink).
func (t *Table) opPath(path string, pid uint32, idx int, ns int64) {
	t.mu.Lock()
	c := t.slotLocked(t.lookupLocked(path), pid)
	c[idx]++
	c[cMetaNs] += uint64(ns)
	t.mu.Unlock()
}

// Flush appends the interval's records to dst, starts the next interval
// and forgets files that no handle holds and nothing counted on for an
// interval. It also returns the operations folded so far.
func (t *Table) Flush(dst []Record) ([]Record, uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, c := range t.pairs {
		dst = append(dst, Record{Path: k.f.path, Pid: k.pid, C: *c})
		*c = Counters{}
		t.free = append(t.free, c)
		delete(t.pairs, k)
	}
	for p, f := range t.files {
		if f.refs <= 0 && f.used < t.gen {
			delete(t.files, p)
		}
	}
	t.gen++
	return dst, t.folded
}
