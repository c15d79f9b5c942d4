package cpu

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Indexes of the per-CPU times of a "cpuN" line, in the kernel's column order.
const (
	User = iota
	Nice
	System
	Idle
	IOWait
	IRQ
	SoftIRQ
	Steal
	Guest
	GuestNice
	NumTimes
)

// minTimes is the fewest values a cpu line may have: kernels before 2.6.24
// end at steal. Missing guest columns then read as 0, as in node_exporter.
const minTimes = Steal + 1

// MaxCPU bounds CPU numbers, so a corrupt "cpu999999999" line cannot make
// the plugin grow per-CPU state without limit. Linux allows NR_CPUS <= 8192.
const MaxCPU = 1 << 16

// CPUTimes is one "cpuN" line: jiffies (USER_HZ ticks) per column.
type CPUTimes struct {
	ID      int
	Jiffies [NumTimes]uint64
}

// Bits of Stat.Found, one per single-value line.
const (
	FoundBootTime uint8 = 1 << iota
	FoundContextSwitches
	FoundForks
	FoundInterrupts
	FoundProcsRunning
	FoundProcsBlocked
	foundAll = 1<<iota - 1
)

// Stat is what Parse found in /proc/stat. Its CPUs slice is reused by the
// next Parse.
type Stat struct {
	CPUs            []CPUTimes // per-CPU lines in file order; the "cpu" total is skipped
	BootTime        uint64     // btime, Unix seconds
	ContextSwitches uint64     // ctxt
	Forks           uint64     // processes
	Interrupts      uint64     // first value of intr
	ProcsRunning    uint64     // procs_running
	ProcsBlocked    uint64     // procs_blocked
	Found           uint8      // Found* bits of the single-value lines seen
}

// ErrFormat marks content that does not look like /proc/stat.
var ErrFormat = errors.New("unexpected format")

// scalars maps the single-value lines to their Found bit, in Found bit order.
var scalars = [...]string{"btime", "ctxt", "processes", "intr", "procs_running", "procs_blocked"}

// Parse scans /proc/stat content into s without allocating (except for
// errors and the first growth of s.CPUs). Lines of unknown kinds are
// skipped. A bad line does not stop the scan: the rest is still parsed and
// the first problem is returned, naming its line.
func Parse(data []byte, s *Stat) error {
	*s = Stat{CPUs: s.CPUs[:0]}
	var first error
	bad := 0
	report := func(err error) {
		if first == nil {
			first = err
		}
		bad++
	}
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = nextLine(data)
		key, rest := kernfs.NextField(line)
		if len(key) == 0 {
			continue
		}
		if len(key) > 3 && string(key[:3]) == "cpu" {
			c, err := parseCPU(key, rest)
			if err != nil {
				report(fmt.Errorf("line %d %s: %w", n, quote(line), err))
				continue
			}
			s.CPUs = append(s.CPUs, c)
			continue
		}
		for i, name := range scalars {
			if string(key) != name {
				continue
			}
			f, _ := kernfs.NextField(rest)
			v, err := kernfs.ParseUint(f)
			if err != nil {
				report(fmt.Errorf("line %d %s: %w", n, quote(line), err))
				break
			}
			switch i {
			case 0:
				s.BootTime = v
			case 1:
				s.ContextSwitches = v
			case 2:
				s.Forks = v
			case 3:
				s.Interrupts = v
			case 4:
				s.ProcsRunning = v
			case 5:
				s.ProcsBlocked = v
			}
			s.Found |= 1 << i
			break
		}
	}
	if len(s.CPUs) == 0 && first == nil {
		report(fmt.Errorf("no per-CPU lines: %w", ErrFormat))
	}
	if s.Found != foundAll && first == nil {
		for i, name := range scalars {
			if s.Found&(1<<i) == 0 {
				report(fmt.Errorf("no %q line: %w", name, ErrFormat))
				break
			}
		}
	}
	if bad > 1 {
		return fmt.Errorf("%w (and %d more problems)", first, bad-1)
	}
	return first
}

// nextLine is kernfs.NextLine with a vectorised search: the intr line of a
// large node is tens of kilobytes that are skipped after the first value.
func nextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// parseCPU parses the number after "cpu" and the time columns.
func parseCPU(key, rest []byte) (CPUTimes, error) {
	var c CPUTimes
	id, err := kernfs.ParseUint(key[3:])
	if err != nil || id >= MaxCPU {
		return c, fmt.Errorf("bad CPU number %q: %w", key[3:], ErrFormat)
	}
	c.ID = int(id)
	i := 0
	for ; i < NumTimes; i++ {
		var f []byte
		f, rest = kernfs.NextField(rest)
		if len(f) == 0 {
			break
		}
		if c.Jiffies[i], err = kernfs.ParseUint(f); err != nil {
			return c, fmt.Errorf("column %d %q: %w", i+2, f, err)
		}
	}
	if i < minTimes {
		return c, fmt.Errorf("short line: %d time values, want at least %d: %w", i, minTimes, ErrFormat)
	}
	return c, nil
}

// quote shortens a line for an error message: an intr line has thousands
// of fields.
func quote(line []byte) string {
	const max = 60
	if len(line) > max {
		return fmt.Sprintf("%q...", line[:max])
	}
	return fmt.Sprintf("%q", line)
}
