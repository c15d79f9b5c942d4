package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Thresholds of the notes.
const (
	memWasteBelow = 0.5  // peak under half the request: suggest less
	memTightAbove = 0.9  // peak over 90 %: suggest more headroom
	memHeadroom   = 1.25 // the suggestion is the peak plus 25 %, rounded up
	cpuLowBelow   = 0.5  // CPU efficiency under 50 %
	ioHeavyRate   = 100 << 20
	minNoteRun    = time.Minute // shorter runs say too little for advice
)

const gib = 1 << 30

// notes are the plain-language advice of a report computed from samples.
func notes(r *Report) []string {
	var out []string
	s := r.Summary
	elapsed := time.Duration(r.Elapsed)
	nodes := len(s.PerNode)
	if asked := memAsked(r); asked > 0 && elapsed >= minNoteRun {
		frac := float64(s.MemUsedPeak) / float64(asked)
		switch {
		case frac < memWasteBelow && asked-s.MemUsedPeak >= gib:
			n := fmt.Sprintf("used %s of the %s of memory asked: ask for %s next time", pct(frac), size(asked), size(suggestMem(s.MemUsedPeak)))
			if nodes > 1 {
				var nodePeak int64
				for _, ns := range s.PerNode {
					nodePeak = max(nodePeak, ns.MemUsedPeak)
				}
				n += fmt.Sprintf(" (%s per node)", size(suggestMem(nodePeak)))
			}
			out = append(out, n)
		case frac > memTightAbove:
			out = append(out, fmt.Sprintf("memory peaked at %s of the %s asked: ask for %s to leave headroom", pct(frac), size(asked), size(suggestMem(s.MemUsedPeak))))
		}
	}
	if r.OOMKills > 0 {
		var where []string
		for _, d := range r.Details {
			if d.OOMKills > 0 {
				where = append(where, d.Node)
			}
		}
		out = append(out, fmt.Sprintf("%d process(es) killed for lack of memory (OOM) on %s: ask for more memory", r.OOMKills, list(where)))
	}
	if r.CPUs > 0 && elapsed >= minNoteRun && s.CPUEfficiency < cpuLowBelow {
		used := s.CPUEfficiency * float64(r.CPUs)
		n := fmt.Sprintf("CPU efficiency %s: used %.1f of the %d cores allocated on average", pct(s.CPUEfficiency), used, r.CPUs)
		if r.CPUs > 1 && used < 1.5 {
			n += "; the job looks serial: ask for 1 core, or check that it runs in parallel"
		} else {
			n += fmt.Sprintf(": ask for about %d next time, or check the job keeps them busy", max(1, int(math.Ceil(used*1.2))))
		}
		out = append(out, n)
	}
	if elapsed >= minNoteRun && nodes > 0 {
		rate := float64(s.ReadBytes+s.WriteBytes) / elapsed.Seconds() / float64(nodes)
		if rate >= ioHeavyRate {
			out = append(out, fmt.Sprintf("I/O heavy: read %s and wrote %s, %s/s per node on average: prefer node-local scratch for temporary files", size(s.ReadBytes), size(s.WriteBytes), size(int64(rate))))
		}
	}
	for _, st := range r.Stragglers {
		what := map[string]string{MetricCPU: "CPU", MetricRead: "read rate", MetricWrite: "write rate"}[st.Metric]
		out = append(out, fmt.Sprintf("%s ran %s below its job peers' median %s for %s of the run: a straggler", st.Node, pct(st.Deficit), what, pct(st.Fraction)))
	}
	return out
}

// suggestMem is peak plus headroom, rounded up to a size people ask for:
// 256 MiB steps up to 1 GiB, then 1.5, 2, 3, 4, 6, 8, 12, 16, … GiB.
func suggestMem(peak int64) int64 {
	want := float64(peak) * memHeadroom
	if want <= gib {
		const q = 256 << 20
		return max(q, int64(math.Ceil(want/q))*q)
	}
	if want >= 1<<60 {
		return peak
	}
	for g := int64(1); ; g *= 2 {
		for _, m := range []int64{2, 3} {
			if v := g * m * gib / 2; float64(v) >= want {
				return v
			}
		}
	}
}

// pct is a fraction as a whole percentage ("6 %").
func pct(f float64) string {
	if !finite(f) {
		return "? %"
	}
	return fmt.Sprintf("%.0f %%", f*100)
}

// size is bytes in binary units with up to 3 significant figures.
func size(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(b)
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%d B", b)
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	prec := 2
	if v >= 10 {
		prec = 1
	}
	t := strings.TrimRight(strconv.FormatFloat(v, 'f', prec, 64), "0")
	return strings.TrimSuffix(t, ".") + " " + units[i]
}

// list names at most 5 items.
func list(items []string) string {
	if len(items) > 5 {
		return strings.Join(items[:5], ", ") + fmt.Sprintf(" and %d more", len(items)-5)
	}
	return strings.Join(items, ", ")
}
