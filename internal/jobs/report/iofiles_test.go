package report

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

// filesQ adds a per-file record store's answers to a Querier.
type filesQ struct {
	Querier
	files map[string][]IOFile // by ranking
	asked []string            // job ids asked
}

func (f *filesQ) JobFiles(_ context.Context, id string, start, end time.Time, limit int) (*IOFiles, error) {
	f.asked = append(f.asked, id)
	l := func(by string) []IOFile { fs := f.files[by]; return fs[:min(len(fs), limit)] }
	return &IOFiles{ByBytes: l("bytes"), ByCalls: l("calls"), ByTime: l("time")}, nil
}

// noSeries is a store without the job's series.
type noSeries struct{}

func (noSeries) Range(context.Context, string, time.Time, time.Time, time.Duration) (promql.Matrix, error) {
	return nil, nil
}

var scratchFile = IOFile{Path: "/scratch/u/out.dat", Node: "cn1", Mountpoint: "/scratch", WriteBytes: 512 * 240000,
	Writes: 240000, MetaOps: 24000, Seconds: 36, SmallWrites: 240000}

// The I/O section lists the store's top files by each ranking, in JSON
// and text, and the small-writes note names the file doing them.
func TestReportIOFiles(t *testing.T) {
	job, q := ioJob(t, 200)
	home := IOFile{Path: "/home/u/input", Node: "cn2", Mountpoint: "/home", ReadBytes: 12 << 30, Reads: 12000, Seconds: 24}
	fq := &filesQ{Querier: q, files: map[string][]IOFile{
		"bytes": {home, scratchFile}, "calls": {scratchFile, home}, "time": {scratchFile, home}}}
	r, err := Build(context.Background(), fq, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.IO == nil || r.IO.Files == nil || len(r.IO.Files.ByBytes) != 2 || r.IO.Files.ByCalls[0].Path != scratchFile.Path {
		t.Fatalf("files: %+v", r.IO)
	}
	if len(fq.asked) != 1 || fq.asked[0] != job.ID {
		t.Errorf("asked for %v", fq.asked)
	}
	notes := strings.Join(r.Summary.Notes, "\n")
	if !strings.Contains(notes, "240 k of them to /scratch/u/out.dat on cn1") {
		t.Errorf("notes:\n%s", notes)
	}
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"by_calls":[{"path":"/scratch/u/out.dat"`) {
		t.Errorf("json: %s", b)
	}
	var text strings.Builder
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Top files by bytes", "Top files by calls", "Top files by time", "/scratch/u/out.dat", "/home/u/input"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// A job whose series are gone (or never came) but whose records the store
// keeps still gets the files and a per-file note; a store without them
// adds nothing.
func TestReportIOFilesOnly(t *testing.T) {
	job := jobs.Job{ID: "91", Start: t0, End: t0.Add(10 * time.Minute), Nodes: []string{"cn1"}}
	r, err := Build(context.Background(), &filesQ{Querier: noSeries{}, files: map[string][]IOFile{"calls": {scratchFile}}}, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.IO == nil || r.IO.Files == nil || len(r.IO.Files.ByCalls) != 1 {
		t.Fatalf("io: %+v", r.IO)
	}
	if notes := strings.Join(r.Summary.Notes, "\n"); !strings.Contains(notes, "240 k writes of ≤ 1 KiB to /scratch/u/out.dat on cn1 (100 % of its writes)") {
		t.Errorf("notes:\n%s", notes)
	}
	r, err = Build(context.Background(), &filesQ{Querier: noSeries{}}, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.IO != nil {
		t.Errorf("io without files: %+v", r.IO)
	}
}
