package report

import (
	"context"
	"fmt"
	"time"
)

// IOFile is one file of a job on one node, from the server's per-file
// record store (internal/iorecords).
type IOFile struct {
	Path       string  `json:"path"`
	Node       string  `json:"node"`
	Mountpoint string  `json:"mountpoint"`
	ReadBytes  uint64  `json:"read_bytes"`
	WriteBytes uint64  `json:"write_bytes"`
	Reads      uint64  `json:"reads"`
	Writes     uint64  `json:"writes"`
	MetaOps    uint64  `json:"meta_ops"`
	Seconds    float64 `json:"seconds"` // in reads, writes and metadata calls
	// SmallWrites are the writes of at most 1 KiB.
	SmallWrites uint64 `json:"small_writes"`
}

// IOFiles are a job's top files by bytes (read + written), calls and time.
type IOFiles struct {
	ByBytes []IOFile `json:"by_bytes"`
	ByCalls []IOFile `json:"by_calls"`
	ByTime  []IOFile `json:"by_time"`
}

// TopFilesLimit is how many files each list of the report holds.
const TopFilesLimit = 10

// FileQuerier is a Querier that also reads the per-file record store: a
// job's top files over start..end by bytes, calls and time, at most limit
// each (nil: none).
type FileQuerier interface {
	JobFiles(ctx context.Context, id string, start, end time.Time, limit int) (*IOFiles, error)
}

// JobFiles reads the per-file store through Files, when it is set.
func (a APIQuerier) JobFiles(ctx context.Context, id string, start, end time.Time, limit int) (*IOFiles, error) {
	if a.Files == nil {
		return nil, nil
	}
	return a.Files(ctx, id, start, end, limit)
}

// topFiles reads the job's top files when q can; nil when it cannot or
// the store holds none (records expired or never sent).
func topFiles(ctx context.Context, q Querier, id string, start, end time.Time) (*IOFiles, error) {
	fq, ok := q.(FileQuerier)
	if !ok {
		return nil, nil
	}
	// The records of the job's last interval end a little after it.
	fs, err := fq.JobFiles(ctx, id, start, end.Add(time.Minute), TopFilesLimit)
	if err != nil {
		return nil, fmt.Errorf("job %s: top files: %w", id, err)
	}
	if fs == nil || len(fs.ByBytes)+len(fs.ByCalls)+len(fs.ByTime) == 0 {
		return nil, nil
	}
	return fs, nil
}
