package report

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/internal/jobs"
)

// LustreFS is what the Lustre servers counted for the job on one file
// system (kept in its Summary).
type LustreFS = jobs.LustreFS

// maxLustreFS bounds the file systems a report lists.
const maxLustreFS = jobs.MaxLustreFS

// lustreFS is the file system of a server target ("scratch-OST0001" →
// "scratch"), "" when the name is not a target's.
func lustreFS(target string) string {
	for _, kind := range []string{"-OST", "-MDT"} {
		if i := strings.LastIndex(target, kind); i > 0 {
			return target[:i]
		}
	}
	return ""
}

// dataOps are job_stats counters of data, not operations to add up:
// bytes and (2.15) the read/write latency counters, and the MDT's
// Data-on-MDT punch.
var dataOps = []string{"read", "write", "read_bytes", "write_bytes"}

// lustreFromStore reads the job's lustre_job_* totals at end, per file
// system, busiest first; nil when the servers counted nothing for it.
// A job_stats entry starts at zero when the job's first request reaches a
// target, so its last value is the job's total there (unless the entry
// was dropped after job_cleanup_interval of idleness mid-job: then only
// what followed is counted).
func lustreFromStore(ctx context.Context, q Querier, id string, start, end time.Time, step time.Duration) ([]LustreFS, error) {
	win := max(end.Sub(start)+minWindow, 10*time.Minute).Truncate(time.Second)
	byFS := map[string]*LustreFS{}
	targets := map[string]bool{}
	get := func(target string) *LustreFS {
		name := lustreFS(target)
		if name == "" {
			return nil
		}
		f := byFS[name]
		if f == nil {
			if len(byFS) >= maxLustreFS {
				return nil
			}
			f = &LustreFS{FS: name}
			byFS[name] = f
		}
		if !targets[target] {
			targets[target] = true
			if strings.Contains(target[len(name):], "-OST") {
				f.OSTs++
			} else {
				f.MDTs++
			}
		}
		return f
	}
	// max by target: a target seen from two servers over the window (a
	// failover) counts once.
	for _, m := range []struct {
		name string
		add  func(f *LustreFS, v float64, op string, mdt bool)
	}{
		{"lustre_job_read_bytes_total", func(f *LustreFS, v float64, _ string, _ bool) { f.ReadBytes += v }},
		{"lustre_job_write_bytes_total", func(f *LustreFS, v float64, _ string, _ bool) { f.WriteBytes += v }},
		{"lustre_job_read_samples_total", func(f *LustreFS, v float64, _ string, mdt bool) {
			if !mdt {
				f.Reads += v
			}
		}},
		{"lustre_job_write_samples_total", func(f *LustreFS, v float64, _ string, mdt bool) {
			if !mdt {
				f.Writes += v
			}
		}},
		{"lustre_job_stats_total", func(f *LustreFS, v float64, op string, mdt bool) {
			switch {
			case slices.Contains(dataOps, op) || mdt && op == "punch":
			case mdt:
				f.MetadataOps += v
			default:
				f.OSTOps += v
			}
		}},
	} {
		expr := fmt.Sprintf(`max by (component,target,operation) (last_over_time(%s[%s]))`, selector(m.name, id), promDur(win))
		res, err := q.Range(ctx, expr, end, end, step)
		if err != nil {
			return nil, fmt.Errorf("job %s: %s at its end: %w", id, m.name, err)
		}
		for _, s := range res {
			if len(s.Floats) == 0 {
				continue
			}
			v := s.Floats[len(s.Floats)-1].F
			if !finite(v) || v < 0 {
				continue
			}
			if f := get(s.Metric.Get("target")); f != nil {
				m.add(f, v, s.Metric.Get("operation"), s.Metric.Get("component") == "mdt")
			}
		}
	}
	if len(byFS) == 0 {
		return nil, nil
	}
	out := make([]LustreFS, 0, len(byFS))
	for _, f := range byFS {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b LustreFS) int {
		ta, tb := a.ReadBytes+a.WriteBytes, b.ReadBytes+b.WriteBytes
		switch {
		case ta > tb:
			return -1
		case ta < tb:
			return 1
		}
		return strings.Compare(a.FS, b.FS)
	})
	return out, nil
}

// writeLustre is the Lustre block of the text report.
func writeLustre(b *strings.Builder, fs []LustreFS) {
	fmt.Fprintf(b, "  %-12s %10s %10s %9s %9s %10s %9s\n", "file system", "read", "written", "reads", "writes", "metadata", "OST ops")
	for _, f := range fs {
		fmt.Fprintf(b, "  %-12s %10s %10s %9s %9s %10s %9s\n", f.FS, size(int64(f.ReadBytes)), size(int64(f.WriteBytes)),
			count(f.Reads), count(f.Writes), count(f.MetadataOps), count(f.OSTOps))
	}
	b.WriteString("  (counted by the servers' job_stats: all the job's nodes, page cache and readahead included)\n")
}
