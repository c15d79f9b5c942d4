package report

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/jobs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/store"
)

// ioLoad is what every node of a synthetic job does per second on one
// file system through libvigilio.
type ioLoad struct {
	mp, fstype           string
	reads, writes        float64 // calls/s
	readSize, writeSize  float64 // bytes per call
	opens, stats         float64 // calls/s
	readS, writeS, metaS float64 // seconds in calls per second
	sequential, random   float64 // accesses/s
}

// synthAppIO writes the appio plugin's series of job id on nodes, a tick
// every interval for dur, counters integrated from the loads.
func synthAppIO(tb testing.TB, st *store.Store, id string, nodes []string, loads []ioLoad, start time.Time, dur, interval time.Duration) {
	tb.Helper()
	var descs []*metric.Desc
	var rates []func(l ioLoad) float64
	for _, l := range loads {
		l := l
		add := func(name string, rate func(ioLoad) float64, kv ...string) {
			descs = append(descs, metric.NewDesc(name, "", metric.Counter, append([]string{"jobid", id, "mountpoint", l.mp, "fstype", l.fstype}, kv...)...))
			rates = append(rates, rate)
		}
		add("vigil_appio_bytes_total", func(l ioLoad) float64 { return l.reads * l.readSize }, "op", "read")
		add("vigil_appio_bytes_total", func(l ioLoad) float64 { return l.writes * l.writeSize }, "op", "write")
		add("vigil_appio_calls_total", func(l ioLoad) float64 { return l.opens }, "op", "open")
		add("vigil_appio_calls_total", func(l ioLoad) float64 { return l.opens }, "op", "close")
		add("vigil_appio_calls_total", func(l ioLoad) float64 { return l.reads }, "op", "read")
		add("vigil_appio_calls_total", func(l ioLoad) float64 { return l.writes }, "op", "write")
		add("vigil_appio_calls_total", func(l ioLoad) float64 { return l.stats }, "op", "stat")
		add("vigil_appio_seconds_total", func(l ioLoad) float64 { return l.readS }, "op", "read")
		add("vigil_appio_seconds_total", func(l ioLoad) float64 { return l.writeS }, "op", "write")
		add("vigil_appio_seconds_total", func(l ioLoad) float64 { return l.metaS }, "op", "meta")
		add("vigil_appio_accesses_total", func(l ioLoad) float64 { return l.sequential }, "pattern", "sequential")
		add("vigil_appio_accesses_total", func(l ioLoad) float64 { return l.random }, "pattern", "random")
		for i, le := range appio.BucketLabels {
			bound := math.Inf(1)
			if i < len(appio.BucketBounds) {
				bound = float64(appio.BucketBounds[i])
			}
			add("vigil_appio_access_size_total", func(l ioLoad) float64 {
				if l.readSize <= bound {
					return l.reads
				}
				return 0
			}, "op", "read", "le", le)
			add("vigil_appio_access_size_total", func(l ioLoad) float64 {
				if l.writeSize <= bound {
					return l.writes
				}
				return 0
			}, "op", "write", "le", le)
		}
	}
	per := len(rates) / len(loads)
	vals := make([]float64, len(descs))
	for t := interval; t <= dur; t += interval {
		for k := range vals {
			vals[k] = rates[k](loads[k/per]) * t.Seconds()
		}
		for _, n := range nodes {
			if err := st.AppendTick(n, start.Add(t), descs, vals, false); err != nil {
				tb.Fatalf("append %s at %v: %v", n, t, err)
			}
		}
	}
}

func flat(i int) (float64, float64, float64, float64) { return 4, 1 << 30, 0, 0 }

// ioJob is a 2-node 10-minute job that writes 512 B records to /scratch
// at smallRate/s per node and reads 1 MiB blocks from /home.
func ioJob(t *testing.T, smallRate float64) (jobs.Job, Querier) {
	st, q := newStore(t)
	nodes := nodeNames(2)
	synthJob(t, st, "77", nodes, []nodeLoad{flat, flat}, 4, 4<<30, t0, 10*time.Minute, 10*time.Second, 0, 0)
	loads := []ioLoad{
		{mp: "/scratch", fstype: "lustre", writes: smallRate, writeSize: 512, opens: 2, stats: 20, writeS: 0.03, metaS: 0.05, sequential: smallRate},
		{mp: "/home", fstype: "nfs", reads: 10, readSize: 1 << 20, opens: 1, readS: 0.02, sequential: 8, random: 2},
	}
	synthAppIO(t, st, "77", nodes, loads, t0, 10*time.Minute, 10*time.Second)
	return jobs.Job{ID: "77", Nodes: nodes, CPUs: 8, Start: t0, End: t0.Add(10 * time.Minute), State: jobs.StateCompleted}, q
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-6*math.Max(1, math.Abs(want)) }

func TestReportIO(t *testing.T) {
	job, q := ioJob(t, 200)
	r, err := Build(context.Background(), q, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	x := r.IO
	if x == nil || len(x.FS) != 2 {
		t.Fatalf("io section: %+v", x)
	}
	// 2 nodes × 600 s.
	const run = 2 * 600.0
	sc, home := x.FS[1], x.FS[0] // busiest first: /home reads 11.7 GiB
	if home.Mountpoint != "/home" || home.FSType != "nfs" || sc.Mountpoint != "/scratch" || sc.FSType != "lustre" {
		t.Fatalf("file systems %s %s, %s %s", home.Mountpoint, home.FSType, sc.Mountpoint, sc.FSType)
	}
	if want := 10 * (1 << 20) * run; !near(home.ReadBytes, want) || home.WriteBytes != 0 {
		t.Errorf("/home read %v written %v, want %v and 0", home.ReadBytes, home.WriteBytes, want)
	}
	if want := 200 * 512 * run; !near(sc.WriteBytes, want) {
		t.Errorf("/scratch written %v, want %v", sc.WriteBytes, want)
	}
	if !near(sc.Calls["write"], 200*run) || !near(sc.Calls["stat"], 20*run) || !near(home.Calls["open"], run) {
		t.Errorf("calls /scratch %v /home %v", sc.Calls, home.Calls)
	}
	// Size histogram: 512 B writes in (100, 1K], 1 MiB reads in (100K, 1M].
	for i := range x.Buckets {
		wantW, wantR := 0.0, 0.0
		if x.Buckets[i] == "1024" {
			wantW = 200 * run
		}
		if x.Buckets[i] == "1048576" {
			wantR = 10 * run
		}
		if !near(x.WriteSizes[i], wantW) || !near(x.ReadSizes[i], wantR) {
			t.Errorf("bucket ≤ %s: reads %v writes %v, want %v %v", x.Buckets[i], x.ReadSizes[i], x.WriteSizes[i], wantR, wantW)
		}
	}
	if !near(x.Sequential, (200+8)*run) || !near(x.Random, 2*run) {
		t.Errorf("sequential %v random %v", x.Sequential, x.Random)
	}
	if !near(x.MetaSeconds, 0.05*run) || !near(x.ReadSeconds, 0.02*run) || !near(x.WriteSeconds, 0.03*run) {
		t.Errorf("seconds read %v write %v meta %v", x.ReadSeconds, x.WriteSeconds, x.MetaSeconds)
	}
	// Rates per node: 10 MiB/s read + 100 KiB/s written; metadata calls:
	// open+close 2×(2+1) and 20 stats per second.
	for key, want := range map[string]float64{MetricAppIOBytes: 10<<20 + 200*512, MetricAppIOMeta: 2*3 + 20} {
		s := r.Series[key]
		if s == nil || len(s.Median) < 5 || len(s.Nodes) != 2 {
			t.Fatalf("series %s: %+v", key, s)
		}
		mid := s.Median[len(s.Median)/2][1]
		if math.Abs(mid-want)/want > 0.01 {
			t.Errorf("%s median mid-run %v, want %v", key, mid, want)
		}
	}
	notes := strings.Join(r.Summary.Notes, "\n")
	for _, want := range []string{"240 k writes of ≤ 1 KiB to /scratch (100 % of its writes)", "metadata calls (open, close, stat, seek, sync…) took 50 % of the time in I/O"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}

	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Application I/O", "/scratch", "lustre", "11.7 GiB", "metadata 1m0s (50 %)", "Accesses 99 % sequential, 1 % random"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		IO *IO `json:"io"`
	}
	if err := json.Unmarshal(js, &back); err != nil || back.IO == nil || len(back.IO.FS) != 2 || len(back.IO.Buckets) != appio.NBuckets {
		t.Errorf("JSON io section: %v %+v", err, back.IO)
	}

	// The summary keeps the section, so the report outlives the raw data:
	// built again from the summary alone, the same file systems and counts
	// (rounded as the index keeps them).
	if len(r.Summary.AppIO) != 2 {
		t.Fatalf("summary keeps %d file systems, want 2", len(r.Summary.AppIO))
	}
	ended := job
	sum := r.Summary
	ended.Summary = &sum
	r2, err := Build(context.Background(), nil, ended, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r2.Source != "summary" || r2.IO == nil || len(r2.IO.FS) != 2 {
		t.Fatalf("report from the summary: source %s, io %+v", r2.Source, r2.IO)
	}
	for i, f := range x.FS {
		g := r2.IO.FS[i]
		if g.Mountpoint != f.Mountpoint || g.WriteBytes != float64(int64(f.WriteBytes)) || g.Calls["write"] != float64(int64(f.Calls["write"])) ||
			math.Abs(g.MetaSeconds-f.MetaSeconds) > 0.001 || !slices.Equal(g.WriteSizes, roundAll(f.WriteSizes)) {
			t.Errorf("file system %d from the summary %+v, from the store %+v", i, g, f)
		}
	}
	if math.Abs(r2.IO.MetaSeconds-x.MetaSeconds) > 0.01 || !slices.Equal(r2.IO.WriteSizes, roundAll(x.WriteSizes)) {
		t.Errorf("totals from the summary %+v, from the store %+v", r2.IO, x)
	}
}

func roundAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(int64(x))
	}
	return out
}

// Fewer than 100,000 small writes, or a job without appio series, give no
// I/O advice.
func TestReportIOQuiet(t *testing.T) {
	job, q := ioJob(t, 50) // 60,000 small writes
	r, err := Build(context.Background(), q, job, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.IO == nil {
		t.Fatal("no io section")
	}
	for _, n := range r.Summary.Notes {
		if strings.Contains(n, "writes of") {
			t.Errorf("note on %s small writes: %q", count(r.IO.FS[1].Calls["write"]), n)
		}
	}

	job, q = wasteJob(t)
	r, err = Build(context.Background(), q, job, t0.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if r.IO != nil || r.Series[MetricAppIOBytes] != nil || r.Series[MetricAppIOMeta] != nil {
		t.Errorf("job without appio series has an io section %+v or series", r.IO)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil || strings.Contains(b.String(), "Application I/O") {
		t.Errorf("text of a job without appio series has an I/O block (%v)", err)
	}
}

func TestDecumulate(t *testing.T) {
	c := []float64{0, 5, 5, 9, 8, 10}
	decumulate(c)
	want := []float64{0, 5, 0, 4, 0, 1}
	for i := range c {
		if c[i] != want[i] {
			t.Fatalf("decumulate: %v, want %v", c, want)
		}
	}
}

// Small reads get their own advice, on the same terms as small writes.
func TestIONotesSmallReads(t *testing.T) {
	mk := func(small, big float64) *IO {
		x := &IO{Buckets: slices.Clone(appio.BucketLabels[:])}
		fs := IOFS{Mountpoint: "/scratch", ReadSizes: make([]float64, len(x.Buckets)), WriteSizes: make([]float64, len(x.Buckets))}
		fs.ReadSizes[0], fs.ReadSizes[len(x.Buckets)-1] = small, big // ≤ 100 B, and the largest bucket
		x.FS = []IOFS{fs}
		return x
	}
	notes := strings.Join(ioNotes(mk(2_100_000, 1000)), "\n")
	if want := "2.1 M reads of ≤ 1 KiB from /scratch (100 % of its reads): read in larger blocks"; !strings.Contains(notes, want) {
		t.Errorf("notes lack %q:\n%s", want, notes)
	}
	for _, x := range []*IO{mk(90_000, 0), mk(200_000, 300_000)} { // too few; not most of the reads
		if n := ioNotes(x); len(n) != 0 {
			t.Errorf("unexpected notes %q", n)
		}
	}
}
