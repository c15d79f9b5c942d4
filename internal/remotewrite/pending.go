package remotewrite

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/storage"
)

// Backfill makes the destinations whose `backfill` is on (the default)
// keep what does not fit their queue in src, the store the tap writes to,
// and read it back later instead of dropping it. dir (may be empty) keeps
// the series still behind at a stop, with what was queued, for the next
// start: a file per destination, read and removed here. Call it before the
// first sample and before Run.
func (w *Writer) Backfill(src storage.Queryable, dir string) error {
	if src == nil || len(w.queues) == 0 {
		return nil
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("remote write: %w", err)
		}
	}
	for _, q := range w.queues {
		if !q.cfg.backfill() {
			continue
		}
		q.source = src
		if dir == "" {
			continue
		}
		sum := sha256.Sum256([]byte(q.cfg.URL))
		q.pendingPath = filepath.Join(dir, "pending-"+hex.EncodeToString(sum[:8]))
		n, err := q.loadPending()
		switch {
		case err != nil:
			// A damaged file must not keep the server from starting;
			// it is kept aside for a look.
			bad := q.pendingPath + ".bad"
			_ = os.Rename(q.pendingPath, bad)
			q.log.Warn("remote write: series behind at the last stop not read; not re-sent", "err", err, "moved_to", bad)
		case n > 0:
			q.log.Info("remote write: series behind at the last stop will be re-sent from the store", "series", n)
		}
	}
	return nil
}

// pendingMagic starts a pending file; the number is its version.
const pendingMagic = "vigil-remote-write-pending 1"

// maxPendingLine bounds a line of a pending file: base64 of a label set.
const maxPendingLine = 256 << 10

// pendingEntry is one line of a pending file.
type pendingEntry struct {
	from   int64
	labels []byte
}

// loadPending reads q.pendingPath into q.lagging and removes it; a
// missing file is no error.
func (q *queue) loadPending() (int, error) {
	f, err := os.Open(q.pendingPath)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	es, err := parsePending(f, q.pendingPath)
	f.Close()
	if err != nil {
		return 0, err
	}
	q.mu.Lock()
	for _, e := range es {
		k := string(e.labels)
		if o := q.lagging[k]; o != nil {
			o.from = min(o.from, e.from)
			continue
		}
		le := &lagEntry{labels: e.labels, hash: maphash.Bytes(q.seed, e.labels), from: e.from}
		q.lagging[k] = le
		q.behind++
		q.fresh = append(q.fresh, le)
	}
	n := q.behind
	q.mu.Unlock()
	// Removed once in memory: a crash before the next stop must not make
	// the next start send them twice.
	return n, os.Remove(q.pendingPath)
}

// parsePending reads a pending file: the magic line, `url URL` (for a
// reader; the file's name ties it to its destination), then one series a
// line, `FROM_MS BASE64_LABEL_SET`. Errors name the file and line.
func parsePending(r io.Reader, name string) ([]pendingEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxPendingLine)
	var out []pendingEntry
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		switch {
		case line == 1:
			if t != pendingMagic {
				return nil, fmt.Errorf("%s:1: want %q", name, pendingMagic)
			}
			continue
		case line == 2:
			if !strings.HasPrefix(t, "url ") {
				return nil, fmt.Errorf("%s:2: want \"url URL\"", name)
			}
			continue
		}
		if len(out) >= maxLagging {
			return nil, fmt.Errorf("%s:%d: more than %d series", name, line, maxLagging)
		}
		ts, enc, ok := strings.Cut(t, " ")
		from, err := strconv.ParseInt(ts, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s:%d: want \"FROM_MS LABELS\"", name, line)
		}
		ls, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: labels: %w", name, line, err)
		}
		if lset, err := decodeLabelSet(ls); err != nil || lset.IsEmpty() {
			if err == nil {
				err = errors.New("label set: empty")
			}
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, pendingEntry{from: from, labels: ls})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%s: empty", name)
	}
	return out, nil
}

// keepPending runs once the senders stopped: what is still queued falls
// behind too, and the series behind are written to q.pendingPath for the
// next start (atomically: a temporary file renamed).
func (q *queue) keepPending() {
	if q.source == nil {
		return
	}
	q.drainUnsent()
	q.mu.Lock()
	defer q.mu.Unlock()
	for k, e := range q.lagging {
		if e.caughtUp {
			delete(q.lagging, k)
		}
	}
	if len(q.lagging) == 0 {
		return
	}
	if q.pendingPath == "" {
		q.log.Warn("remote write: series behind at stop are not re-sent (no data directory)", "series", len(q.lagging))
		return
	}
	if err := writePending(q.pendingPath, q.url, q.lagging); err != nil {
		q.log.Error("remote write: series behind at stop not kept", "series", len(q.lagging), "err", err)
		return
	}
	q.log.Info("remote write: series behind kept for the next start", "series", len(q.lagging), "file", q.pendingPath)
}

func writePending(path, url string, lagging map[string]*lagEntry) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "%s\nurl %s\n", pendingMagic, url)
	var buf []byte
	for _, e := range lagging {
		buf = strconv.AppendInt(buf[:0], e.from, 10)
		buf = append(buf, ' ')
		buf = base64.StdEncoding.AppendEncode(buf, e.labels)
		buf = append(buf, '\n')
		_, _ = w.Write(buf)
	}
	err = errors.Join(w.Flush(), f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}
