package iorecords

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/duration"
)

// PathTop is the top files and jobs API.
const PathTop = "/api/v1/io/top"

// Limits bound the API's queries, as the server's query limits do
// PromQL's: at most Concurrent at once (more get 503 with Retry-After),
// each within Timeout and reading at most MaxRecords records.
type Limits struct {
	Concurrent int           // 0: the number of cores
	Timeout    time.Duration // 0: 2m
	MaxRecords int           // 0: 50,000,000
	// MaxWindow bounds end − start (0: 31 days).
	MaxWindow time.Duration
}

// MaxLimit bounds the entries of each list of an answer.
const MaxLimit = 1000

// FileJSON is one file of the top list as the API gives it.
type FileJSON struct {
	Node       string `json:"node"`
	Job        string `json:"job"`
	Path       string `json:"path"`
	MountPoint string `json:"mountpoint"`
	FSType     string `json:"fstype"`
	UID        uint32 `json:"uid"`
	CountersJSON
}

// JobJSON is one job of the top list.
type JobJSON struct {
	Job   string `json:"job"`
	Files int    `json:"files"`
	Nodes int    `json:"nodes"`
	CountersJSON
}

// CountersJSON are summed records: bytes, calls, seconds and the access
// size histograms (Darshan's 10 buckets, not cumulative).
type CountersJSON struct {
	Records      int       `json:"records"`
	Processes    int       `json:"processes"`
	First        time.Time `json:"first"`
	Last         time.Time `json:"last"`
	BytesRead    uint64    `json:"bytes_read"`
	BytesWritten uint64    `json:"bytes_written"`
	Reads        uint64    `json:"reads"`
	Writes       uint64    `json:"writes"`
	Opens        uint64    `json:"opens"`
	Closes       uint64    `json:"closes"`
	Seeks        uint64    `json:"seeks"`
	Syncs        uint64    `json:"syncs"`
	Stats        uint64    `json:"stats"`
	Mmaps        uint64    `json:"mmaps"`
	MetaOther    uint64    `json:"meta_other"`
	MetaOps      uint64    `json:"meta_ops"` // opens .. meta_other
	Calls        uint64    `json:"calls"`    // reads + writes + meta_ops
	ReadSeconds  float64   `json:"read_seconds"`
	WriteSeconds float64   `json:"write_seconds"`
	MetaSeconds  float64   `json:"meta_seconds"`
	Seconds      float64   `json:"seconds"`
	ReadSizes    []uint64  `json:"read_sizes"`
	WriteSizes   []uint64  `json:"write_sizes"`
}

// TopJSON is the data of an answer.
type TopJSON struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	By      By        `json:"by"`
	Job     *string   `json:"job,omitempty"`
	Records int       `json:"records"`
	// FilesCapped: the window held more than 100,000 files; the list
	// ranks the first 100,000 seen.
	FilesCapped bool       `json:"files_capped,omitempty"`
	Files       []FileJSON `json:"files"`
	Jobs        []JobJSON  `json:"jobs"`
}

// Counters converts totals for the API.
func Counters(t *Totals) CountersJSON {
	c := &t.Counters
	cj := CountersJSON{
		Records: t.Records, Processes: t.Processes(),
		First: time.Unix(0, t.First).UTC(), Last: time.Unix(0, t.Last).UTC(),
		BytesRead: c[appio.BytesRead], BytesWritten: c[appio.BytesWritten],
		Reads: c[appio.Reads], Writes: c[appio.Writes], Opens: c[appio.Opens], Closes: c[appio.Closes],
		Seeks: c[appio.Seeks], Syncs: c[appio.Syncs], Stats: c[appio.Stats], Mmaps: c[appio.Mmaps], MetaOther: c[appio.MetaOther],
		ReadSeconds: float64(c[appio.ReadNS]) / 1e9, WriteSeconds: float64(c[appio.WriteNS]) / 1e9, MetaSeconds: float64(c[appio.MetaNS]) / 1e9,
		ReadSizes:  append([]uint64(nil), c[appio.ReadHist:appio.ReadHist+appio.NBuckets]...),
		WriteSizes: append([]uint64(nil), c[appio.WriteHist:appio.WriteHist+appio.NBuckets]...),
	}
	cj.MetaOps = cj.Opens + cj.Closes + cj.Seeks + cj.Syncs + cj.Stats + cj.Mmaps + cj.MetaOther
	cj.Calls = cj.Reads + cj.Writes + cj.MetaOps
	cj.Seconds = cj.ReadSeconds + cj.WriteSeconds + cj.MetaSeconds
	return cj
}

// ToJSON converts a result for the API.
func ToJSON(q Query, r *Result) TopJSON {
	out := TopJSON{Start: q.Start.UTC(), End: q.End.UTC(), By: q.By, Records: r.Records, FilesCapped: r.FilesCapped,
		Files: []FileJSON{}, Jobs: []JobJSON{}}
	if q.HasJob {
		out.Job = &q.Job
	}
	for i := range r.Files {
		f := &r.Files[i]
		out.Files = append(out.Files, FileJSON{Node: f.Node, Job: f.Job, Path: f.Path, MountPoint: f.MountPoint,
			FSType: f.FSType, UID: f.UID, CountersJSON: Counters(&f.Totals)})
	}
	for i := range r.Jobs {
		j := &r.Jobs[i]
		out.Jobs = append(out.Jobs, JobJSON{Job: j.Job, Files: j.Files, Nodes: j.Nodes(), CountersJSON: Counters(&j.Totals)})
	}
	return out
}

// ParseQuery reads the API's parameters: job, by, since (a duration
// before now) or start and end (RFC 3339 or Unix seconds; end defaults
// to now, start to an hour before end), limit (default 20).
func ParseQuery(get func(string) string, has func(string) bool, now time.Time, maxWindow time.Duration) (Query, error) {
	var q Query
	var err error
	if q.By, err = ParseBy(get("by")); err != nil {
		return q, err
	}
	q.Job, q.HasJob = get("job"), has("job")
	if len(q.Job) > 256 {
		return q, errors.New("job: longer than 256 bytes")
	}
	q.Limit = 20
	if l := get("limit"); l != "" {
		if q.Limit, err = strconv.Atoi(l); err != nil || q.Limit < 1 || q.Limit > MaxLimit {
			return q, fmt.Errorf("limit %q: want 1 to %d", l, MaxLimit)
		}
	}
	q.End = now
	if e := get("end"); e != "" {
		if q.End, err = parseTime(e); err != nil {
			return q, fmt.Errorf("end: %w", err)
		}
	}
	q.Start = q.End.Add(-time.Hour)
	switch since, start := get("since"), get("start"); {
	case since != "" && start != "":
		return q, errors.New("since and start: give one")
	case since != "":
		d, err := duration.Parse(since)
		if err != nil || d <= 0 {
			return q, fmt.Errorf("since %q: want a duration such as 15m", since)
		}
		q.Start = q.End.Add(-d)
	case start != "":
		if q.Start, err = parseTime(start); err != nil {
			return q, fmt.Errorf("start: %w", err)
		}
	}
	if !q.Start.Before(q.End) {
		return q, errors.New("start must be before end")
	}
	if q.End.Sub(q.Start) > maxWindow {
		return q, fmt.Errorf("window longer than %s", duration.Duration(maxWindow))
	}
	return q, nil
}

func parseTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || f > 1e11 {
			return time.Time{}, fmt.Errorf("%q: Unix seconds out of range", s)
		}
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want RFC 3339 or Unix seconds", s)
	}
	return t, nil
}

// Handler serves GET /api/v1/io/top within l.
func (s *Store) Handler(l Limits) http.Handler {
	if l.Concurrent <= 0 {
		l.Concurrent = runtime.NumCPU() // as the query API's heavy lane
	}
	if l.Timeout <= 0 {
		l.Timeout = 2 * time.Minute
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = 50_000_000
	}
	if l.MaxWindow <= 0 {
		l.MaxWindow = 31 * 24 * time.Hour
	}
	sem := make(chan struct{}, l.Concurrent)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.URL.Query()
		q, err := ParseQuery(v.Get, v.Has, s.o.now(), l.MaxWindow)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_data", err.Error())
			return
		}
		q.MaxRecords = l.MaxRecords
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("too many io queries at once (at most %d)", l.Concurrent))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), l.Timeout)
		defer cancel()
		res, err := s.Top(ctx, q)
		switch {
		case errors.Is(err, ErrTooMany):
			writeError(w, http.StatusUnprocessableEntity, "execution", err.Error())
			return
		case errors.Is(err, context.DeadlineExceeded):
			writeError(w, http.StatusServiceUnavailable, "timeout", "io query timed out")
			return
		case err != nil:
			writeError(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Status string  `json:"status"`
			Data   TopJSON `json:"data"`
		}{"success", ToJSON(q, res)})
	})
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
	}{"error", typ, msg})
}
