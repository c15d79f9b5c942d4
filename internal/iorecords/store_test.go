package iorecords

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vigil-hpc/vigil/internal/appio"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// rec is a record of job on node: file path, written bytes in writes of
// 1 KiB over the second at sec.
func rec(job, node, path string, sec int, written uint64) appio.FileRecord {
	r := appio.FileRecord{Start: t0.Add(time.Duration(sec) * time.Second).UnixNano(), Node: node, JobID: job, PID: 7, UID: 1000,
		Rank: -1, Exe: "/bin/dd", Path: path, MountPoint: "/scratch", FSType: "lustre"}
	r.End = r.Start + 1e9
	r.Counters[appio.BytesWritten] = written
	r.Counters[appio.Writes] = written / 1024
	r.Counters[appio.WriteNS] = written // 1 ns a byte
	r.Counters[appio.Opens] = 1
	return r
}

func open(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	o.Dir = dir
	if o.now == nil {
		o.now = func() time.Time { return t0.Add(time.Hour) }
	}
	s, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func top(t *testing.T, s *Store, q Query) *Result {
	t.Helper()
	if q.End.IsZero() {
		q.Start, q.End = t0, t0.Add(time.Hour)
	}
	r, err := s.Top(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Sums per file and per job over the window, ranked by each measure, the
// window's edges exact, for one job or all, and the same after a restart.
func TestTop(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{SegmentBytes: 4096}) // many segments
	var recs []appio.FileRecord
	for sec := range 60 {
		recs = append(recs, rec("1", "cn1", "/scratch/a", sec, 1<<20), rec("1", "cn2", "/scratch/a", sec, 1<<10),
			rec("2", "cn1", "/scratch/b", sec, 3<<20))
		if sec%10 == 0 {
			r := rec("3", "cn3", "/scratch/meta", sec, 0)
			r.Counters[appio.Stats] = 100000
			r.Counters[appio.MetaNS] = 5e9
			recs = append(recs, r)
		}
	}
	for i := 0; i < len(recs); i += 7 {
		if err := s.Append(recs[i:min(i+7, len(recs))]); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.segs) < 3 {
		t.Fatalf("%d segments", len(s.segs))
	}
	check := func(s *Store) {
		t.Helper()
		r := top(t, s, Query{By: ByBytes})
		if r.Records != len(recs) || len(r.Files) != 4 || len(r.Jobs) != 3 {
			t.Fatalf("records %d files %d jobs %d", r.Records, len(r.Files), len(r.Jobs))
		}
		if f := r.Files[0]; f.Job != "2" || f.Path != "/scratch/b" || f.Counters[appio.BytesWritten] != 60*3<<20 || f.Records != 60 {
			t.Errorf("top file by bytes: %+v", f)
		}
		if j := r.Jobs[1]; j.Job != "1" || j.Files != 2 || j.Nodes() != 2 || j.Counters[appio.BytesWritten] != 60*(1<<20+1<<10) {
			t.Errorf("second job by bytes: %+v", j)
		}
		if r := top(t, s, Query{By: ByCalls, Limit: 1}); len(r.Files) != 1 || r.Files[0].Path != "/scratch/meta" || r.Files[0].Value(ByCalls) != 6*100001 {
			t.Errorf("top file by calls: %+v", r.Files)
		}
		if r := top(t, s, Query{By: ByTime}); r.Jobs[0].Job != "3" || r.Jobs[0].Value(ByTime) != 30e9 {
			t.Errorf("top job by time: %+v", r.Jobs[0])
		}
		// One job, over the intervals ending in (t0+10s, t0+20s]: 10.
		r = top(t, s, Query{Job: "1", HasJob: true, Start: t0.Add(10 * time.Second), End: t0.Add(20 * time.Second)})
		if r.Records != 20 || len(r.Jobs) != 1 || r.Files[0].Node != "cn1" || r.Files[0].Counters[appio.BytesWritten] != 10<<20 {
			t.Errorf("job 1 over 10 s: records %d, files %+v", r.Records, r.Files)
		}
		if r := top(t, s, Query{Job: "nope", HasJob: true}); r.Records != 0 || len(r.Files) != 0 {
			t.Errorf("unknown job: %+v", r)
		}
		tops, err := s.JobFiles(context.Background(), "1", t0, t0.Add(time.Hour), 1)
		if err != nil || len(tops[ByBytes]) != 1 || tops[ByBytes][0].Node != "cn1" || tops[ByTime][0].Node != "cn1" ||
			tops[ByCalls][0].Value(ByCalls) != 60*1025 {
			t.Errorf("job 1's files: %v %+v", err, tops)
		}
		if _, err := s.Top(context.Background(), Query{Start: t0, End: t0.Add(time.Hour), MaxRecords: 10}); err == nil {
			t.Error("MaxRecords not enforced")
		}
	}
	check(s)
	s.Close()
	check(open(t, dir, Options{SegmentBytes: 4096}))
}

// A torn record at the end of the newest segment (a crash mid-write) is
// cut off at open; what came before is kept and appends go on.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if err := s.Append([]appio.FileRecord{rec("1", "cn1", "/a", 1, 100), rec("1", "cn1", "/b", 2, 200)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	name := filepath.Join(dir, fmt.Sprintf("%016d.iorec", 1))
	fi, _ := os.Stat(name)
	if err := os.Truncate(name, fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	if r := top(t, s, Query{}); r.Records != 1 || r.Files[0].Path != "/a" {
		t.Fatalf("after a torn tail: %+v", r)
	}
	if err := s.Append([]appio.FileRecord{rec("1", "cn1", "/c", 3, 300)}); err != nil {
		t.Fatal(err)
	}
	if r := top(t, s, Query{}); r.Records != 2 {
		t.Fatalf("after appending: %d records", r.Records)
	}
}

// Retention removes whole segments past the age or the size, never the
// one being written, also while a query reads them.
func TestRetention(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(time.Hour)
	s := open(t, dir, Options{SegmentBytes: 2048, Retention: 30 * time.Minute, MaxBytes: 1 << 30,
		now: func() time.Time { return now }})
	for sec := range 3600 {
		if sec%60 == 0 {
			if err := s.Append([]appio.FileRecord{rec("1", "cn1", "/a", sec, 1)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := top(t, s, Query{})
	// Whole segments (about 13 records of 2 KiB) go: all of the last 30
	// minutes is kept, and at most a segment more.
	if r.Records < 30 || r.Records > 30+14 {
		t.Errorf("%d records kept of 60, want the last 30 minutes' 30 and at most a segment more", r.Records)
	}
	vs := s.acquire(0, 1<<62, "", false) // a query reading
	s.o.MaxBytes = 4096
	s.Retain()
	s.release(vs)
	if s.bytes > 4096+2048 || len(s.segs) < 1 {
		t.Errorf("%d bytes in %d segments after the size bound", s.bytes, len(s.segs))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.iorec"))
	if len(files) != len(s.segs) {
		t.Errorf("%d files for %d segments", len(files), len(s.segs))
	}
}

func TestAPI(t *testing.T) {
	s := open(t, t.TempDir(), Options{now: func() time.Time { return t0.Add(2 * time.Minute) }})
	if err := s.Append([]appio.FileRecord{rec("7", "cn1", "/scratch/x", 0, 102_400_000), rec("8", "cn2", "/scratch/y", 0, 1)}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler(Limits{}))
	defer srv.Close()
	get := func(q string) (int, TopJSON) {
		resp, err := http.Get(srv.URL + PathTop + "?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Data TopJSON }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Data
	}
	code, d := get("since=5m&by=bytes")
	if code != 200 || len(d.Files) != 2 || d.Files[0].Path != "/scratch/x" || d.Files[0].BytesWritten != 102_400_000 || d.Files[0].Writes != 100_000 {
		t.Fatalf("%d %+v", code, d)
	}
	if code, d := get("job=8"); code != 200 || len(d.Files) != 1 || d.Files[0].Job != "8" || d.Job == nil {
		t.Errorf("job=8: %d %+v", code, d)
	}
	if code, d := get("since=30s"); code != 200 || len(d.Files) != 0 {
		t.Errorf("since=30s: %d %+v", code, d)
	}
	for _, q := range []string{"by=size", "since=-1m", "limit=0", "limit=5000", "since=1m&start=1", "start=2000&end=1000", "since=1y"} {
		if code, _ := get(q); code != 400 {
			t.Errorf("%s: HTTP %d, want 400", q, code)
		}
	}
}

func FuzzParseStored(f *testing.F) {
	r := rec("1", "cn1", "/a", 1, 100)
	f.Add(appendStored(nil, &r))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw rawRecord
		n, err := parseStored(b, &raw)
		if err != nil {
			return
		}
		if n > len(b) || n < storedHead {
			t.Fatalf("size %d of %d bytes", n, len(b))
		}
	})
}

// Records ending over 10 minutes ahead of the server's clock or older
// than the retention are dropped and counted; the others of the batch kept.
func TestOutOfRange(t *testing.T) {
	now := t0.Add(time.Hour)
	s := open(t, t.TempDir(), Options{Retention: 2 * time.Hour, now: func() time.Time { return now }})
	recs := []appio.FileRecord{rec("1", "cn1", "/ok", 60, 1), rec("1", "cn1", "/future", 3600+11*60, 1),
		rec("1", "cn1", "/old", -3*3600, 1), rec("1", "cn1", "/soon", 3600+5*60, 1)}
	if err := s.Append(recs); err != nil {
		t.Fatal(err)
	}
	r := top(t, s, Query{Start: t0.Add(-5 * time.Hour), End: t0.Add(5 * time.Hour)})
	if r.Records != 2 || len(s.segs) != 1 {
		t.Fatalf("%d records kept in %d segments: %+v", r.Records, len(s.segs), r.Files)
	}
	if got := testutil.ToFloat64(s.outOfRange); got != 2 {
		t.Errorf("out of range counted %v, want 2", got)
	}
}

// A frame sent again (its acknowledgement lost) is not stored twice, also
// after a restart; a record that differs in anything is.
func TestResentNotDuplicated(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{Dedup: 100})
	batch := []appio.FileRecord{rec("1", "cn1", "/a", 1, 1024), rec("1", "cn1", "/b", 1, 2048)}
	for range 2 {
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	if r := top(t, s, Query{}); r.Records != 2 {
		t.Fatalf("%d records after a resend, want 2", r.Records)
	}
	s.Close()
	s = open(t, dir, Options{Dedup: 100})
	other := rec("1", "cn2", "/a", 1, 1024) // another node: a record of its own
	if err := s.Append(append(batch, other, other)); err != nil {
		t.Fatal(err)
	}
	if r := top(t, s, Query{}); r.Records != 3 || r.Files[0].Counters[appio.BytesWritten] != 2048 {
		t.Fatalf("after a restart and a resend: %d records, %+v", r.Records, r.Files)
	}
	if got := testutil.ToFloat64(s.duplicates); got != 3 {
		t.Errorf("duplicates counted %v, want 3", got)
	}
	// Beyond the remembered records, a resend is stored again (the bound).
	for i := range 200 {
		if err := s.Append([]appio.FileRecord{rec("2", "cn1", fmt.Sprint("/f", i), 2, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Append(batch[:1]); err != nil {
		t.Fatal(err)
	}
	if r := top(t, s, Query{Job: "1", HasJob: true}); r.Records != 4 {
		t.Errorf("%d records of job 1, want 4 (the old one stored again)", r.Records)
	}
}
