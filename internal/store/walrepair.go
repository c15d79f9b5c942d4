package store

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/tsdb/wlog"
)

// repairLogs cuts the torn tail off the write-ahead logs (WAL and the
// out-of-order WBL) of the TSDB in dir, before tsdb.Open sees them.
//
// The TSDB's own repair rewrites the corrupted segment into a new file,
// which needs free space: on a full disk it fails half-way, and the open
// fails; the next open finds the half-written segment (the original waits
// in a .repair file it does not read) and loses the rest. A write that
// fails here tears at most the log's last record, and truncating a file
// needs no space, so the store does this part itself.
func repairLogs(dir string, log *slog.Logger) error {
	for _, sub := range []string{"wal", "wbl"} {
		if err := repairLog(filepath.Join(dir, sub), log); err != nil {
			return err
		}
	}
	return nil
}

func repairLog(dir string, log *slog.Logger) error {
	es, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: read %s: %w", dir, err)
	}
	// An interrupted TSDB repair left the whole original segment aside.
	for _, e := range es {
		seg, ok := strings.CutSuffix(e.Name(), ".repair")
		if _, err := strconv.Atoi(seg); !ok || err != nil {
			continue
		}
		from, to := filepath.Join(dir, e.Name()), filepath.Join(dir, seg)
		log.Warn("restoring a WAL segment from an interrupted repair", "segment", to)
		if err := os.Rename(from, to); err != nil {
			return fmt.Errorf("store: restore %s: %w", to, err)
		}
	}
	first, last, err := wlog.Segments(dir)
	if err != nil {
		return fmt.Errorf("store: list segments of %s: %w", dir, err)
	}
	// Nothing is written after a failed write, so only the last segment
	// with data can end torn; the TSDB handles anything else.
	for i := last; i >= first && i >= 0; i-- {
		fn := wlog.SegmentName(dir, i)
		fi, err := os.Stat(fn)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if fi.Size() > 0 {
			return cutTornTail(fn, fi.Size(), log)
		}
	}
	return nil
}

// cutTornTail truncates segment fn after its last complete record, if
// what follows does not read as records.
func cutTornTail(fn string, size int64, log *slog.Logger) error {
	seg, err := wlog.OpenReadSegment(fn)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", fn, err)
	}
	r := wlog.NewReader(wlog.NewSegmentBufReader(seg))
	good := int64(0)
	for r.Next() {
		good = r.Offset()
	}
	rerr := r.Err()
	seg.Close()
	if rerr == nil {
		return nil
	}
	log.Warn("cutting the torn tail of a WAL segment: the rest was never acknowledged",
		"segment", fn, "offset", good, "bytes", size-good, "err", rerr)
	f, err := os.OpenFile(fn, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("store: cut torn tail of %s: %w", fn, err)
	}
	defer f.Close()
	if err := f.Truncate(good); err != nil {
		return fmt.Errorf("store: cut torn tail of %s: %w", fn, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: cut torn tail of %s: %w", fn, err)
	}
	return nil
}
