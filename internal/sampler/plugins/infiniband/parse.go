package infiniband

import (
	"bytes"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Status says what ParseCounter found.
type Status int

// ParseCounter's outcomes.
const (
	OK           Status = iota
	NotAvailable        // "N/A (no PMA)": the port has no performance agent
	Malformed
)

// ParseCounter reads a counter file: one unsigned decimal on a line.
func ParseCounter(b []byte) (uint64, Status) {
	line, _ := kernfs.NextLine(b)
	line = kernfs.TrimSpace(line)
	if bytes.HasPrefix(line, []byte("N/A")) {
		return 0, NotAvailable
	}
	v, err := kernfs.ParseUint(line)
	if err != nil {
		return 0, Malformed
	}
	return v, OK
}

// ParseState reads a state or phys_state file, "<id>: <NAME>" such as
// "4: ACTIVE" or "5: LinkUp", and returns the id.
func ParseState(b []byte) (uint64, bool) {
	line, _ := kernfs.NextLine(b)
	id, name, ok := kernfs.Cut(line, ':')
	if !ok || len(kernfs.TrimSpace(name)) == 0 {
		return 0, false
	}
	v, err := kernfs.ParseUint(kernfs.TrimSpace(id))
	if err != nil || v > 255 {
		return 0, false
	}
	return v, true
}

// ParseRate reads a rate file, "<n> Gb/sec (<width><speed>)" such as
// "100 Gb/sec (4X EDR)", as bytes per second: the number rounded to a
// float32 and times 125,000,000, truncated, as node_exporter does.
func ParseRate(b []byte) (float64, bool) {
	line, _ := kernfs.NextLine(b)
	num, rest := kernfs.NextField(line)
	if len(rest) == 0 {
		return 0, false
	}
	v, err := kernfs.ParseFixed(num)
	if err != nil || v < 0 || v > 1e6 {
		return 0, false
	}
	return float64(uint64(float64(float32(v)) * 125000000)), true
}
