package report

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/jobs"
)

// Series keys of the application I/O rates (from the appio plugin): bytes/s
// read plus written, and metadata calls/s, per node.
const (
	MetricAppIOBytes = "appio_bytes"
	MetricAppIOMeta  = "appio_meta"
)

// metaOps are the calls counted as metadata operations.
const metaOps = "open|close|stat|meta|seek|sync"

// callOps are vigil_appio_calls_total's op values, in display order.
var callOps = jobs.AppIOCallOps[:]

// The summary keeps as many size buckets as the protocol has.
var _ [jobs.AppIOBuckets]int64 = [appio.NBuckets]int64{}

// summaryIO is io as the job index keeps it: counts rounded to integers,
// at most jobs.MaxAppIOFS file systems (the busiest).
func summaryIO(io *IO) []jobs.AppIOFS {
	if io == nil {
		return nil
	}
	out := make([]jobs.AppIOFS, 0, min(len(io.FS), jobs.MaxAppIOFS))
	for _, f := range io.FS[:min(len(io.FS), jobs.MaxAppIOFS)] {
		a := jobs.AppIOFS{Mountpoint: f.Mountpoint, FSType: f.FSType, ReadBytes: int64(f.ReadBytes), WriteBytes: int64(f.WriteBytes),
			ReadSeconds: f.ReadSeconds, WriteSeconds: f.WriteSeconds, MetaSeconds: f.MetaSeconds,
			Sequential: int64(f.Sequential), Random: int64(f.Random)}
		for i, op := range callOps {
			a.Calls[i] = int64(f.Calls[op])
		}
		for i := range a.ReadSizes {
			a.ReadSizes[i], a.WriteSizes[i] = int64(f.ReadSizes[i]), int64(f.WriteSizes[i])
		}
		out = append(out, a)
	}
	return out
}

// ioFromSummary is the I/O section from the job index's summary, for a job
// whose raw samples are gone; nil when it has none.
func ioFromSummary(fs []jobs.AppIOFS) *IO {
	if len(fs) == 0 {
		return nil
	}
	nb := appio.NBuckets
	out := &IO{Buckets: slices.Clone(appio.BucketLabels[:]), ReadSizes: make([]float64, nb), WriteSizes: make([]float64, nb)}
	for _, a := range fs {
		f := IOFS{Mountpoint: a.Mountpoint, FSType: a.FSType, ReadBytes: float64(a.ReadBytes), WriteBytes: float64(a.WriteBytes),
			Calls: map[string]float64{}, ReadSeconds: a.ReadSeconds, WriteSeconds: a.WriteSeconds, MetaSeconds: a.MetaSeconds,
			Sequential: float64(a.Sequential), Random: float64(a.Random), ReadSizes: make([]float64, nb), WriteSizes: make([]float64, nb)}
		for i, op := range callOps {
			f.Calls[op] = float64(a.Calls[i])
		}
		for i := range nb {
			f.ReadSizes[i], f.WriteSizes[i] = float64(a.ReadSizes[i]), float64(a.WriteSizes[i])
			out.ReadSizes[i] += f.ReadSizes[i]
			out.WriteSizes[i] += f.WriteSizes[i]
		}
		out.Sequential += f.Sequential
		out.Random += f.Random
		out.ReadSeconds += f.ReadSeconds
		out.WriteSeconds += f.WriteSeconds
		out.MetaSeconds += f.MetaSeconds
		out.FS = append(out.FS, f)
	}
	return out
}

// maxIOFS bounds the file systems a report lists: the plugin folds beyond
// its own cap, this guards the report against a hostile store.
const maxIOFS = 64

// IOFS is what a job's processes did through libvigilio or vigil iofs on
// one file system, summed over its nodes.
type IOFS struct {
	Mountpoint   string             `json:"mountpoint"`
	FSType       string             `json:"fstype"`
	ReadBytes    float64            `json:"read_bytes"`
	WriteBytes   float64            `json:"write_bytes"`
	Calls        map[string]float64 `json:"calls"`
	ReadSeconds  float64            `json:"read_seconds"`
	WriteSeconds float64            `json:"write_seconds"`
	MetaSeconds  float64            `json:"meta_seconds"`
	Sequential   float64            `json:"sequential"`
	Random       float64            `json:"random"`
	// ReadSizes and WriteSizes count accesses per size bucket (not
	// cumulative), bounds as IO.Buckets.
	ReadSizes  []float64 `json:"read_sizes"`
	WriteSizes []float64 `json:"write_sizes"`
}

// IO is the report's application I/O section; nil when the job has no
// appio series.
type IO struct {
	// Buckets are the size buckets' upper bounds in bytes ("+Inf" last),
	// as the `le` label of vigil_appio_access_size_total.
	Buckets    []string  `json:"buckets"`
	FS         []IOFS    `json:"fs"`
	ReadSizes  []float64 `json:"read_sizes"` // all file systems
	WriteSizes []float64 `json:"write_sizes"`
	Sequential float64   `json:"sequential"`
	Random     float64   `json:"random"`
	// Seconds in reads, writes and metadata calls, all file systems.
	ReadSeconds  float64 `json:"read_seconds"`
	WriteSeconds float64 `json:"write_seconds"`
	MetaSeconds  float64 `json:"meta_seconds"`
	// Files are the job's top files from the per-file record store, when
	// it still holds them.
	Files *IOFiles `json:"files,omitempty"`
}

// ioQueries read each appio counter's job total per file system: the
// counters start when the sampler first sees the job, so each node's last
// value is its total; max by node first so that a series seen twice
// (rollups) counts once.
func ioQuery(name, id string, win time.Duration) string {
	by := "mountpoint,fstype,op,le,pattern"
	return fmt.Sprintf(`sum by (%s) (max by (node,%s) (last_over_time(%s[%s])))`, by, by, selector(name, id), promDur(win))
}

// ioFromStore reads the job's appio totals at end; nil when there are none.
func ioFromStore(ctx context.Context, q Querier, id string, start, end time.Time, step time.Duration) (*IO, error) {
	// The window covers the whole run: a job whose I/O stopped early
	// keeps its last values.
	win := max(end.Sub(start)+minWindow, 10*time.Minute).Truncate(time.Second)
	nb := appio.NBuckets
	fs := map[[2]string]*IOFS{}
	var order [][2]string
	get := func(mp, ft string) *IOFS {
		k := [2]string{mp, ft}
		if f := fs[k]; f != nil {
			return f
		}
		if len(fs) >= maxIOFS {
			return nil
		}
		f := &IOFS{Mountpoint: mp, FSType: ft, Calls: map[string]float64{}, ReadSizes: make([]float64, nb), WriteSizes: make([]float64, nb)}
		fs[k] = f
		order = append(order, k)
		return f
	}
	leIndex := map[string]int{}
	for i, le := range appio.BucketLabels {
		leIndex[le] = i
	}
	for _, name := range []string{"vigil_appio_bytes_total", "vigil_appio_calls_total", "vigil_appio_seconds_total", "vigil_appio_accesses_total", "vigil_appio_access_size_total"} {
		m, err := q.Range(ctx, ioQuery(name, id, win), end, end, step)
		if err != nil {
			return nil, fmt.Errorf("job %s: %s at its end: %w", id, name, err)
		}
		for _, s := range m {
			if len(s.Floats) == 0 {
				continue
			}
			v := s.Floats[len(s.Floats)-1].F
			if !finite(v) || v < 0 {
				continue
			}
			f := get(s.Metric.Get("mountpoint"), s.Metric.Get("fstype"))
			if f == nil {
				continue
			}
			op := s.Metric.Get("op")
			switch name {
			case "vigil_appio_bytes_total":
				switch op {
				case "read":
					f.ReadBytes += v
				case "write":
					f.WriteBytes += v
				}
			case "vigil_appio_calls_total":
				if slices.Contains(callOps, op) {
					f.Calls[op] += v
				}
			case "vigil_appio_seconds_total":
				switch op {
				case "read":
					f.ReadSeconds += v
				case "write":
					f.WriteSeconds += v
				case "meta":
					f.MetaSeconds += v
				}
			case "vigil_appio_accesses_total":
				switch s.Metric.Get("pattern") {
				case "sequential":
					f.Sequential += v
				case "random":
					f.Random += v
				}
			case "vigil_appio_access_size_total":
				i, ok := leIndex[s.Metric.Get("le")]
				if !ok {
					continue
				}
				switch op {
				case "read":
					f.ReadSizes[i] += v
				case "write":
					f.WriteSizes[i] += v
				}
			}
		}
	}
	if len(order) == 0 {
		return nil, nil
	}
	out := &IO{Buckets: slices.Clone(appio.BucketLabels[:]), ReadSizes: make([]float64, nb), WriteSizes: make([]float64, nb)}
	for _, k := range order {
		f := fs[k]
		decumulate(f.ReadSizes)
		decumulate(f.WriteSizes)
		for i := range nb {
			out.ReadSizes[i] += f.ReadSizes[i]
			out.WriteSizes[i] += f.WriteSizes[i]
		}
		out.Sequential += f.Sequential
		out.Random += f.Random
		out.ReadSeconds += f.ReadSeconds
		out.WriteSeconds += f.WriteSeconds
		out.MetaSeconds += f.MetaSeconds
		out.FS = append(out.FS, *f)
	}
	// Busiest file system first.
	slices.SortStableFunc(out.FS, func(a, b IOFS) int {
		ta, tb := a.ReadBytes+a.WriteBytes, b.ReadBytes+b.WriteBytes
		switch {
		case ta > tb:
			return -1
		case ta < tb:
			return 1
		}
		return 0
	})
	return out, nil
}

// decumulate turns cumulative bucket counts into per-bucket counts; a
// bucket below its predecessor (counts read at slightly different
// times) counts as zero.
func decumulate(c []float64) {
	prev := 0.0
	for i, v := range c {
		c[i] = max(0, v-prev)
		prev = max(prev, v)
	}
}

// ioRangeQueries are the appio rate series per node, as rangeQueries.
func ioRangeQueries(id string, sel func(string) string, w string) [][2]string {
	meta := sel("vigil_appio_calls_total")
	meta = meta[:len(meta)-1] + `,op=~` + strconv.Quote(metaOps) + "}"
	return [][2]string{
		{MetricAppIOBytes, fmt.Sprintf(`sum by (node) (rate(%s[%s]))`, sel("vigil_appio_bytes_total"), w)},
		{MetricAppIOMeta, fmt.Sprintf(`sum by (node) (rate(%s[%s]))`, meta, w)},
	}
}

// Thresholds of the I/O notes.
const (
	smallWriteMax      = 1 << 10 // a small write is ≤ 1 KiB: the first two buckets
	smallWriteShare    = 0.5     // more than half of the writes
	smallWriteMinCount = 100_000 // and more than this many
	smallReadMax       = 1 << 10 // reads likewise: ≤ 1 KiB
	smallReadShare     = 0.5
	smallReadMinCount  = 100_000
	metaShareAbove     = 0.3 // metadata over 30 % of the time in I/O
	metaMinSeconds     = 10  // and at least this long
)

// ioNotes advise on the job's application I/O.
func ioNotes(x *IO) []string {
	if x == nil {
		return nil
	}
	var out []string
	small, smallR := 0, 0
	for i, le := range x.Buckets {
		if b, err := strconv.ParseFloat(le, 64); err == nil {
			if b <= smallWriteMax {
				small = i + 1
			}
			if b <= smallReadMax {
				smallR = i + 1
			}
		}
	}
	for _, f := range x.FS {
		if all, few := smallShare(f.ReadSizes, smallR); few > smallReadMinCount && few > smallReadShare*all {
			out = append(out, fmt.Sprintf("%s reads of ≤ %s from %s (%s of its reads): read in larger blocks (or through a buffered stream)", count(few), size(smallReadMax), f.Mountpoint, pct(few/all)))
		}
		var all, few float64
		for i, v := range f.WriteSizes {
			all += v
			if i < small {
				few += v
			}
		}
		if few > smallWriteMinCount && few > smallWriteShare*all {
			where := ""
			if w := smallWriter(x.Files, f.Mountpoint); w != nil {
				where = fmt.Sprintf("; %s of them to %s on %s", count(float64(w.SmallWrites)), w.Path, w.Node)
			}
			out = append(out, fmt.Sprintf("%s writes of ≤ %s to %s (%s of its writes%s): buffer them into larger writes", count(few), size(smallWriteMax), f.Mountpoint, pct(few/all), where))
		}
	}
	if len(x.FS) == 0 && x.Files != nil {
		// Only the record store knows the job's I/O: advise per file.
		seen := map[[2]string]bool{}
		for _, l := range [][]IOFile{x.Files.ByCalls, x.Files.ByBytes, x.Files.ByTime} {
			for _, fl := range l {
				k := [2]string{fl.Node, fl.Path}
				few := float64(fl.SmallWrites)
				if seen[k] || len(seen) >= 3 || few <= smallWriteMinCount || few <= smallWriteShare*float64(fl.Writes) {
					continue
				}
				seen[k] = true
				out = append(out, fmt.Sprintf("%s writes of ≤ %s to %s on %s (%s of its writes): buffer them into larger writes",
					count(few), size(smallWriteMax), fl.Path, fl.Node, pct(few/float64(fl.Writes))))
			}
		}
	}
	total := x.ReadSeconds + x.WriteSeconds + x.MetaSeconds
	if total > 0 && x.MetaSeconds >= metaMinSeconds && x.MetaSeconds > metaShareAbove*total {
		out = append(out, fmt.Sprintf("metadata calls (open, close, stat, seek, sync…) took %s of the time in I/O (%s): open files once and keep them open, avoid stat and sync in loops", pct(x.MetaSeconds/total), secs(x.MetaSeconds)))
	}
	return out
}

// count is a number with a k/M/G suffix, 2 significant decimals at most.
func count(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'f', 1, 64) + " G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 1, 64) + " M"
	case v >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', 0, 64) + " k"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// secs is seconds as a duration people read ("1h2m3s", "2.5s").
func secs(v float64) string {
	if v >= 60 {
		return time.Duration(v * float64(time.Second)).Round(time.Second).String()
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + "s"
}

// smallShare is the accesses in sizes and those in its first small buckets.
func smallShare(sizes []float64, small int) (all, few float64) {
	for i, v := range sizes {
		all += v
		if i < small {
			few += v
		}
	}
	return all, few
}

// smallWriter is the listed file under mount with the most small writes,
// nil if none has any.
func smallWriter(fs *IOFiles, mount string) *IOFile {
	if fs == nil {
		return nil
	}
	var w *IOFile
	for _, l := range [][]IOFile{fs.ByCalls, fs.ByBytes, fs.ByTime} {
		for i := range l {
			if f := &l[i]; f.Mountpoint == mount && f.SmallWrites > 0 && (w == nil || f.SmallWrites > w.SmallWrites) {
				w = f
			}
		}
	}
	return w
}
