package jobs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// A record is one Job, encoded compactly (docs/format/jobs.md): varints,
// times as milliseconds relative to the one before, fractions in units of
// 1/10,000, so an ended job with its summary takes about 100 bytes.

const codecVersion = 1

// Which optional parts a record has (the flags varint).
const (
	hasSummary = 1 << iota
	hasAppIO   // the summary's AppIO follows its notes
	hasEnergy  // the summary's Energy follows (after AppIO)
	hasLustre  // the summary's Lustre follows (after Energy)
)

var errShort = errors.New("record ends early")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendMillis(b []byte, t, rel time.Time) (int64, []byte) {
	if t.IsZero() {
		return 0, append(b, 0) // zigzag 0: unknown
	}
	ms := t.UnixMilli()
	d := ms - rel.UnixMilli()
	if rel.IsZero() {
		d = ms
	}
	return ms, binary.AppendUvarint(b, zigzag(d)+1) // 0 is "unknown"
}

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func frac(f float64) uint64 {
	if !(f > 0) { // NaN and negatives
		return 0
	}
	if f > 100 {
		f = 100
	}
	return uint64(math.Round(f * 1e4))
}

func nonNeg(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

// appendNodeRef writes a node of the summary as its place in nodes
// (1-based; usually the same place) or 0 and its name.
func appendNodeRef(b []byte, node string, nodes []string) []byte {
	for i, n := range nodes {
		if n == node {
			return binary.AppendUvarint(b, uint64(i+1))
		}
	}
	return appendString(binary.AppendUvarint(b, 0), node)
}

func (d *decoder) nodeRef(nodes []string, intern func([]byte) string) string {
	i := d.uvarint()
	switch {
	case d.err != nil:
		return ""
	case i == 0:
		return d.str(intern)
	case i > uint64(len(nodes)):
		d.err = fmt.Errorf("node %d of a job of %d", i, len(nodes))
		return ""
	}
	return nodes[i-1]
}

// appendJob appends j's encoding to b.
func appendJob(b []byte, j *Job) []byte {
	b = append(b, codecVersion)
	b = appendString(b, j.ID)
	var flags uint64
	if j.Summary != nil {
		flags |= hasSummary
		if len(j.Summary.AppIO) > 0 {
			flags |= hasAppIO
		}
		if j.Summary.Energy != nil {
			flags |= hasEnergy
		}
		if len(j.Summary.Lustre) > 0 {
			flags |= hasLustre
		}
	}
	b = binary.AppendUvarint(b, flags)
	b = appendString(b, string(j.State))
	b = appendString(b, j.User)
	b = appendString(b, j.Account)
	b = appendString(b, j.Partition)
	b = appendString(b, j.Name)
	b = binary.AppendUvarint(b, uint64(len(j.Nodes)))
	for _, n := range j.Nodes {
		b = appendString(b, n)
	}
	b = binary.AppendUvarint(b, nonNeg(int64(j.CPUs)))
	b = binary.AppendUvarint(b, nonNeg(j.MemBytes))
	b = binary.AppendUvarint(b, nonNeg(int64(j.GPUs)))
	b = binary.AppendUvarint(b, nonNeg(int64(time.Duration(j.TimeLimit)/time.Second)))
	// Submit absolute, start relative to submit (or absolute), end to start.
	var rel time.Time
	_, b = appendMillis(b, j.Submit, rel)
	if !j.Submit.IsZero() {
		rel = j.Submit
	}
	_, b = appendMillis(b, j.Start, rel)
	if !j.Start.IsZero() {
		rel = j.Start
	}
	_, b = appendMillis(b, j.End, rel)
	b = binary.AppendVarint(b, int64(j.ExitCode))
	if s := j.Summary; s != nil {
		b = binary.AppendUvarint(b, frac(s.CPUEfficiency))
		b = binary.AppendUvarint(b, nonNeg(s.MemUsedPeak))
		b = binary.AppendUvarint(b, frac(s.MemEfficiency))
		b = binary.AppendUvarint(b, nonNeg(s.ReadBytes))
		b = binary.AppendUvarint(b, nonNeg(s.WriteBytes))
		b = binary.AppendUvarint(b, uint64(len(s.PerNode)))
		for _, n := range s.PerNode {
			b = appendNodeRef(b, n.Node, j.Nodes)
			b = binary.AppendUvarint(b, frac(n.CPUEfficiency))
			b = binary.AppendUvarint(b, nonNeg(n.MemUsedPeak))
			b = binary.AppendUvarint(b, nonNeg(n.ReadBytes))
			b = binary.AppendUvarint(b, nonNeg(n.WriteBytes))
		}
		b = binary.AppendUvarint(b, uint64(len(s.Stragglers)))
		for _, n := range s.Stragglers {
			b = appendNodeRef(b, n, j.Nodes)
		}
		b = binary.AppendUvarint(b, uint64(len(s.Notes)))
		for _, n := range s.Notes {
			b = appendString(b, n)
		}
		if len(s.AppIO) > 0 {
			b = appendAppIO(b, s.AppIO[:min(len(s.AppIO), MaxAppIOFS)])
		}
		if s.Energy != nil {
			b = appendEnergy(b, s.Energy, j.Nodes)
		}
		if len(s.Lustre) > 0 {
			b = appendLustre(b, s.Lustre[:min(len(s.Lustre), MaxLustreFS)])
		}
	}
	return b
}

// appendAppIO appends the file systems' counts (seconds as milliseconds).
func appendAppIO(b []byte, fs []AppIOFS) []byte {
	b = binary.AppendUvarint(b, uint64(len(fs)))
	for i := range fs {
		f := &fs[i]
		b = appendString(b, f.Mountpoint)
		b = appendString(b, f.FSType)
		b = binary.AppendUvarint(b, nonNeg(f.ReadBytes))
		b = binary.AppendUvarint(b, nonNeg(f.WriteBytes))
		for _, c := range f.Calls {
			b = binary.AppendUvarint(b, nonNeg(c))
		}
		for _, s := range [...]float64{f.ReadSeconds, f.WriteSeconds, f.MetaSeconds} {
			b = binary.AppendUvarint(b, millis(s))
		}
		b = binary.AppendUvarint(b, nonNeg(f.Sequential))
		b = binary.AppendUvarint(b, nonNeg(f.Random))
		for _, c := range f.ReadSizes {
			b = binary.AppendUvarint(b, nonNeg(c))
		}
		for _, c := range f.WriteSizes {
			b = binary.AppendUvarint(b, nonNeg(c))
		}
	}
	return b
}

// appendEnergy appends the energy section, joules in millijoules, at most
// MaxEnergyNodes nodes and missing names (the rest counted as folded).
func appendEnergy(b []byte, e *Energy, nodes []string) []byte {
	b = binary.AppendUvarint(b, millis(e.Joules))
	b = binary.AppendUvarint(b, millis(e.NodeJoules))
	shared := uint64(0)
	if e.Shared {
		shared = 1
	}
	b = binary.AppendUvarint(b, shared)
	kept := e.Nodes[:min(len(e.Nodes), MaxEnergyNodes)]
	b = binary.AppendUvarint(b, nonNeg(int64(e.Folded)+int64(len(e.Nodes)-len(kept))))
	b = binary.AppendUvarint(b, uint64(len(kept)))
	for _, n := range kept {
		b = appendNodeRef(b, n.Node, nodes)
		b = binary.AppendUvarint(b, millis(n.Joules))
		b = binary.AppendUvarint(b, millis(n.NodeJoules))
		b = binary.AppendUvarint(b, frac(n.Share))
		b = appendString(b, n.Source)
	}
	missing := e.Missing[:min(len(e.Missing), MaxEnergyNodes)]
	b = binary.AppendUvarint(b, nonNeg(int64(e.MissingFolded)+int64(len(e.Missing)-len(missing))))
	b = binary.AppendUvarint(b, uint64(len(missing)))
	for _, n := range missing {
		b = appendNodeRef(b, n, nodes)
	}
	return b
}

func (d *decoder) energy(nodes []string, intern func([]byte) string) *Energy {
	e := &Energy{}
	e.Joules = float64(clampInt64(d.uvarint())) / 1000
	e.NodeJoules = float64(clampInt64(d.uvarint())) / 1000
	e.Shared = d.uvarint() != 0
	e.Folded = clampInt(d.uvarint())
	if n := d.count(MaxEnergyNodes); n > 0 {
		e.Nodes = make([]NodeEnergy, n)
		for i := range e.Nodes {
			ne := &e.Nodes[i]
			ne.Node = d.nodeRef(nodes, intern)
			ne.Joules = float64(clampInt64(d.uvarint())) / 1000
			ne.NodeJoules = float64(clampInt64(d.uvarint())) / 1000
			ne.Share = unfrac(d.uvarint())
			ne.Source = d.str(intern)
		}
	}
	e.MissingFolded = clampInt(d.uvarint())
	if n := d.count(MaxEnergyNodes); n > 0 {
		e.Missing = make([]string, n)
		for i := range e.Missing {
			e.Missing[i] = d.nodeRef(nodes, intern)
		}
	}
	return e
}

// appendLustre appends the Lustre file systems (figures as whole counts).
func appendLustre(b []byte, fs []LustreFS) []byte {
	b = binary.AppendUvarint(b, uint64(len(fs)))
	for _, f := range fs {
		b = appendString(b, f.FS)
		for _, v := range [...]float64{f.ReadBytes, f.WriteBytes, f.Reads, f.Writes, f.MetadataOps, f.OSTOps} {
			b = binary.AppendUvarint(b, whole(v))
		}
		b = binary.AppendUvarint(b, nonNeg(int64(f.OSTs)))
		b = binary.AppendUvarint(b, nonNeg(int64(f.MDTs)))
	}
	return b
}

func (d *decoder) lustre(intern func([]byte) string) []LustreFS {
	n := d.count(MaxLustreFS)
	if n == 0 {
		return nil
	}
	fs := make([]LustreFS, n)
	for i := range fs {
		f := &fs[i]
		f.FS = d.str(intern)
		for _, p := range [...]*float64{&f.ReadBytes, &f.WriteBytes, &f.Reads, &f.Writes, &f.MetadataOps, &f.OSTOps} {
			*p = float64(clampInt64(d.uvarint()))
		}
		f.OSTs = clampInt(d.uvarint())
		f.MDTs = clampInt(d.uvarint())
	}
	return fs
}

// whole is a non-negative count rounded to a whole number.
func whole(v float64) uint64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return 0
	}
	return uint64(min(math.Round(v), float64(math.MaxInt64)))
}

// millis is a non-negative number of seconds in whole milliseconds.
func millis(s float64) uint64 {
	if !(s > 0) || math.IsInf(s, 0) {
		return 0
	}
	return uint64(min(s*1000, float64(math.MaxInt64)))
}

func (d *decoder) appIO(intern func([]byte) string) []AppIOFS {
	fs := make([]AppIOFS, d.count(MaxAppIOFS))
	for i := range fs {
		f := &fs[i]
		f.Mountpoint = d.str(intern)
		f.FSType = d.str(intern)
		f.ReadBytes = clampInt64(d.uvarint())
		f.WriteBytes = clampInt64(d.uvarint())
		for k := range f.Calls {
			f.Calls[k] = clampInt64(d.uvarint())
		}
		f.ReadSeconds = float64(clampInt64(d.uvarint())) / 1000
		f.WriteSeconds = float64(clampInt64(d.uvarint())) / 1000
		f.MetaSeconds = float64(clampInt64(d.uvarint())) / 1000
		f.Sequential = clampInt64(d.uvarint())
		f.Random = clampInt64(d.uvarint())
		for k := range f.ReadSizes {
			f.ReadSizes[k] = clampInt64(d.uvarint())
		}
		for k := range f.WriteSizes {
			f.WriteSizes[k] = clampInt64(d.uvarint())
		}
	}
	return fs
}

// decoder reads a record; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a list length, at most max and at most one per byte left.
func (d *decoder) count(max int) int {
	n := d.uvarint()
	if n > uint64(max) || n > uint64(len(d.b)) {
		if d.err == nil {
			d.err = fmt.Errorf("list of %d items: more than the record or the limit (%d) holds", n, max)
		}
		return 0
	}
	return int(n)
}

func (d *decoder) str(intern func([]byte) string) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return ""
	}
	s := d.b[:n]
	d.b = d.b[n:]
	if intern != nil {
		return intern(s)
	}
	return string(s)
}

func (d *decoder) millis(rel time.Time) time.Time {
	u := d.uvarint()
	if u == 0 || d.err != nil {
		return time.Time{}
	}
	ms := unzigzag(u - 1)
	if !rel.IsZero() {
		ms += rel.UnixMilli()
	}
	return time.UnixMilli(ms).UTC()
}

func unfrac(u uint64) float64 { return float64(u) / 1e4 }

func clampInt(u uint64) int {
	if u > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(u)
}

func clampInt64(u uint64) int64 {
	if u > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(u)
}

// decodeJob decodes one record; intern, if not nil, shares repeated strings.
func decodeJob(b []byte, intern func([]byte) string) (*Job, error) {
	if len(b) == 0 || b[0] != codecVersion {
		return nil, fmt.Errorf("record version %v, want %d", b[:min(len(b), 1)], codecVersion)
	}
	d := &decoder{b: b[1:]}
	j := &Job{}
	j.ID = d.str(nil)
	flags := d.uvarint()
	j.State = State(d.str(intern))
	j.User = d.str(intern)
	j.Account = d.str(intern)
	j.Partition = d.str(intern)
	j.Name = d.str(nil)
	if n := d.count(MaxNodes); n > 0 {
		j.Nodes = make([]string, n)
		for i := range j.Nodes {
			j.Nodes[i] = d.str(intern)
		}
	}
	j.CPUs = clampInt(d.uvarint())
	j.MemBytes = clampInt64(d.uvarint())
	j.GPUs = clampInt(d.uvarint())
	j.TimeLimit = Duration(time.Duration(min(d.uvarint(), uint64(math.MaxInt64/int64(time.Second)))) * time.Second)
	var rel time.Time
	j.Submit = d.millis(rel)
	if !j.Submit.IsZero() {
		rel = j.Submit
	}
	j.Start = d.millis(rel)
	if !j.Start.IsZero() {
		rel = j.Start
	}
	j.End = d.millis(rel)
	j.ExitCode = int(max(min(d.varint(), math.MaxInt32), math.MinInt32))
	if flags&hasSummary != 0 {
		s := &Summary{}
		s.CPUEfficiency = unfrac(d.uvarint())
		s.MemUsedPeak = clampInt64(d.uvarint())
		s.MemEfficiency = unfrac(d.uvarint())
		s.ReadBytes = clampInt64(d.uvarint())
		s.WriteBytes = clampInt64(d.uvarint())
		s.PerNode = make([]NodeSummary, d.count(MaxNodes))
		for i := range s.PerNode {
			n := &s.PerNode[i]
			n.Node = d.nodeRef(j.Nodes, intern)
			n.CPUEfficiency = unfrac(d.uvarint())
			n.MemUsedPeak = clampInt64(d.uvarint())
			n.ReadBytes = clampInt64(d.uvarint())
			n.WriteBytes = clampInt64(d.uvarint())
		}
		if n := d.count(MaxNodes); n > 0 {
			s.Stragglers = make([]string, n)
			for i := range s.Stragglers {
				s.Stragglers[i] = d.nodeRef(j.Nodes, intern)
			}
		}
		if n := d.count(MaxNotes); n > 0 {
			s.Notes = make([]string, n)
			for i := range s.Notes {
				s.Notes[i] = d.str(nil)
			}
		}
		if flags&hasAppIO != 0 {
			s.AppIO = d.appIO(intern)
		}
		if flags&hasEnergy != 0 {
			s.Energy = d.energy(j.Nodes, intern)
		}
		if flags&hasLustre != 0 {
			s.Lustre = d.lustre(intern)
		}
		j.Summary = s
	}
	if d.err != nil {
		return nil, d.err
	}
	return j, nil
}
