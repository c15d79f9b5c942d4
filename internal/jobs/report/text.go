package report

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

const (
	ruleWidth = 78
	barWidth  = 40
)

// WriteText renders r as `vigil job report` prints it: a header, the
// utilization bars, the per-node table and the notes.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	rule := strings.Repeat("=", ruleWidth) + "\n"
	center := func(s string) { fmt.Fprintf(&b, "%*s\n", (ruleWidth+len(s))/2, s) }
	j, s := r.Job, r.Summary
	b.WriteString(rule)
	center("Vigil job report")
	b.WriteString(rule)
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%14s: %s\n", k, v)
		}
	}
	field("Job", j.ID)
	field("Name", j.Name)
	field("User", j.User)
	field("Account", j.Account)
	field("Partition", j.Partition)
	field("State", strings.ToUpper(string(j.State)))
	nodes := j.Nodes
	if len(nodes) == 0 {
		for _, ns := range s.PerNode {
			nodes = append(nodes, ns.Node)
		}
	}
	if len(nodes) > 0 {
		field("Nodes", fmt.Sprintf("%d (%s)", len(nodes), list(nodes)))
	}
	if c := cmp.Or(r.CPUs, j.CPUs); c > 0 {
		field("Cores", fmt.Sprint(c))
	}
	if j.GPUs > 0 {
		field("GPUs", fmt.Sprint(j.GPUs))
	}
	if asked := memAsked(r); asked > 0 {
		v := size(asked)
		if len(nodes) > 1 {
			v += fmt.Sprintf(" (%s per node)", size(asked/int64(len(nodes))))
		}
		field("Memory asked", v)
	}
	if r.MemLimit > 0 && r.MemLimit != memAsked(r) {
		field("Memory limit", size(r.MemLimit)+" (cgroups, all nodes)")
	}
	if !j.Start.IsZero() {
		field("Start", j.Start.UTC().Format(time.RFC3339))
	}
	if !j.End.IsZero() {
		field("End", j.End.UTC().Format(time.RFC3339))
	}
	if r.Elapsed > 0 {
		v := clock(time.Duration(r.Elapsed))
		if j.TimeLimit > 0 {
			v += fmt.Sprintf(" of %s limit (%s)", clock(time.Duration(j.TimeLimit)), pct(float64(r.Elapsed)/float64(j.TimeLimit)))
		}
		field("Run time", v)
	}
	if j.ExitCode != 0 {
		field("Exit code", fmt.Sprint(j.ExitCode))
	}
	switch r.Source {
	case "summary":
		field("Figures", "from the summary stored at the job's end (raw samples expired)")
	case "none":
		field("Figures", "none stored")
	}

	b.WriteString("\n")
	center("Overall utilization")
	b.WriteString(rule)
	fmt.Fprintf(&b, "  CPU    %s\n", bar(s.CPUEfficiency, ""))
	memNote := ""
	if s.MemUsedPeak > 0 {
		memNote = fmt.Sprintf("%s peak", size(s.MemUsedPeak))
	}
	if memAsked(r) > 0 {
		fmt.Fprintf(&b, "  Memory %s\n", bar(s.MemEfficiency, memNote))
	} else if memNote != "" {
		fmt.Fprintf(&b, "  Memory %s (nothing asked)\n", memNote)
	}
	if r.Elapsed > 0 {
		sec := time.Duration(r.Elapsed).Seconds()
		fmt.Fprintf(&b, "  I/O    read %s (%s/s), wrote %s (%s/s)\n", size(s.ReadBytes), size(int64(float64(s.ReadBytes)/sec)), size(s.WriteBytes), size(int64(float64(s.WriteBytes)/sec)))
	}

	if len(s.PerNode) > 0 {
		b.WriteString("\n")
		center("Per node")
		b.WriteString(rule)
		fmt.Fprintf(&b, "  %-16s %7s %11s %11s %11s\n", "node", "CPU", "mem peak", "read", "write")
		strag := map[string]bool{}
		for _, n := range s.Stragglers {
			strag[n] = true
		}
		for _, ns := range s.PerNode {
			mark := ""
			if strag[ns.Node] {
				mark = " straggler"
			}
			fmt.Fprintf(&b, "  %-16s %7s %11s %11s %11s%s\n", ns.Node, pct(ns.CPUEfficiency), size(ns.MemUsedPeak), size(ns.ReadBytes), size(ns.WriteBytes), mark)
		}
	}
	if r.IO != nil {
		b.WriteString("\n")
		center("Application I/O")
		b.WriteString(rule)
		writeIO(&b, r.IO)
	}
	if r.Energy != nil {
		b.WriteString("\n")
		center("Energy")
		b.WriteString(rule)
		writeEnergy(&b, r.Energy, time.Duration(r.Elapsed))
	}
	if len(r.Lustre) > 0 {
		b.WriteString("\n")
		center("Lustre")
		b.WriteString(rule)
		writeLustre(&b, r.Lustre)
	}
	if len(s.Notes) > 0 {
		b.WriteString("\n")
		center("Notes")
		b.WriteString(rule)
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "  * %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// bar is a fraction as a bar of barWidth cells and a percentage; over 100 %
// fills the bar.
func bar(f float64, extra string) string {
	if !finite(f) || f < 0 {
		f = 0
	}
	n := min(barWidth, int(f*barWidth+0.5))
	s := "[" + strings.Repeat("|", n) + strings.Repeat(" ", barWidth-n) + "] " + pct(f)
	if extra != "" {
		s += ", " + extra
	}
	return s
}

// clock is a duration as [D-]HH:MM:SS, as Slurm prints it.
func clock(d time.Duration) string {
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	s := fmt.Sprintf("%02d:%02d:%02d", d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second)
	if days > 0 {
		s = fmt.Sprintf("%d-%s", days, s)
	}
	return s
}

// writeIO is the application I/O block: a table per file system, the
// access sizes as bars, the sequential share.
func writeIO(b *strings.Builder, x *IO) {
	defer writeFiles(b, x.Files)
	fmt.Fprintf(b, "  %-20s %-8s %10s %10s %9s %9s %9s\n", "file system", "type", "read", "written", "opens", "reads", "writes")
	for _, f := range x.FS {
		fmt.Fprintf(b, "  %-20s %-8s %10s %10s %9s %9s %9s\n", f.Mountpoint, f.FSType, size(int64(f.ReadBytes)), size(int64(f.WriteBytes)),
			count(f.Calls["open"]), count(f.Calls["read"]), count(f.Calls["write"]))
	}
	if t := x.ReadSeconds + x.WriteSeconds + x.MetaSeconds; t > 0 {
		fmt.Fprintf(b, "  Time in I/O %s: read %s, write %s, metadata %s (%s)\n", secs(t), secs(x.ReadSeconds), secs(x.WriteSeconds), secs(x.MetaSeconds), pct(x.MetaSeconds/t))
	}
	if a := x.Sequential + x.Random; a > 0 {
		fmt.Fprintf(b, "  Accesses %s sequential, %s random\n", pct(x.Sequential/a), pct(x.Random/a))
	}
	var peakR, peakW float64
	for i := range x.Buckets {
		peakR, peakW = max(peakR, x.ReadSizes[i]), max(peakW, x.WriteSizes[i])
	}
	if peakR+peakW == 0 {
		return
	}
	// Each column is scaled to its own peak: the shape matters, the
	// counts are printed.
	const w = 24
	hbar := func(v, peak float64) string {
		n := 0
		if peak > 0 {
			n = min(w, int(v/peak*w+0.5))
		}
		return strings.Repeat("#", n) + strings.Repeat(" ", w-n)
	}
	fmt.Fprintf(b, "  %-10s %-*s  %s\n", "up to", w+9, "reads", "writes")
	for i, le := range x.Buckets {
		label := le
		if v, err := strconv.ParseInt(le, 10, 64); err == nil {
			label = size(v)
		}
		fmt.Fprintf(b, "  %-10s %s %8s  %s %8s\n", label, hbar(x.ReadSizes[i], peakR), count(x.ReadSizes[i]), hbar(x.WriteSizes[i], peakW), count(x.WriteSizes[i]))
	}
}

// textFiles is how many files each top list of the text report shows.
const textFiles = 5

// writeFiles lists the job's top files by bytes, calls and time.
func writeFiles(b *strings.Builder, fs *IOFiles) {
	if fs == nil {
		return
	}
	for _, l := range []struct {
		by    string
		files []IOFile
	}{{"bytes", fs.ByBytes}, {"calls", fs.ByCalls}, {"time", fs.ByTime}} {
		if len(l.files) == 0 {
			continue
		}
		fmt.Fprintf(b, "  Top files by %s\n", l.by)
		fmt.Fprintf(b, "    %-40s %-12s %10s %10s %9s %9s %9s %8s\n", "file", "node", "read", "written", "reads", "writes", "meta ops", "time")
		for _, f := range l.files[:min(len(l.files), textFiles)] {
			path := f.Path
			if path == "" {
				path = "(other files)"
			} else if len(path) > 40 {
				path = "…" + path[len(path)-39:]
			}
			fmt.Fprintf(b, "    %-40s %-12s %10s %10s %9s %9s %9s %8s\n", path, f.Node, size(int64(f.ReadBytes)), size(int64(f.WriteBytes)),
				count(float64(f.Reads)), count(float64(f.Writes)), count(float64(f.MetaOps)), secs(f.Seconds))
		}
	}
}
