package jobs

import (
	"errors"
	"fmt"
	"math"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// errFormat is wrapped by every parse error.
var errFormat = errors.New("unexpected content")

// parseKeyed reads "key value" lines (memory.stat, cpu.stat, cpuacct.stat,
// memory.events, memory.oom_control) and stores the value of keys[i] in
// out[i]. The returned mask has bit i set for each key found. Keys not
// asked for are skipped unparsed.
func parseKeyed(data []byte, keys []string, out []uint64) (uint32, error) {
	var found uint32
	for lineNo := 1; len(data) > 0; lineNo++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		name, rest := kernfs.NextField(line)
		if len(name) == 0 {
			continue
		}
		for i, k := range keys {
			if string(name) != k {
				continue
			}
			f, _ := kernfs.NextField(rest)
			v, err := kernfs.ParseUint(f)
			if err != nil {
				return found, fmt.Errorf("%w: line %d: %s %q is not a count", errFormat, lineNo, k, f)
			}
			out[i] = v
			found |= 1 << i
			break
		}
	}
	return found, nil
}

// unlimited is what a v1 memory.limit_in_bytes holds when no limit is set
// (PAGE_COUNTER_MAX pages, rounded); anything this large is no limit.
const unlimited = 1 << 62

// parseLimit reads a single number, or "max" (cgroup v2: no limit).
// ok is false when there is no limit.
func parseLimit(data []byte) (v uint64, ok bool, err error) {
	f := kernfs.TrimSpace(data)
	if string(f) == "max" {
		return 0, false, nil
	}
	v, err = kernfs.ParseUint(f)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %q is not a byte count or \"max\"", errFormat, f)
	}
	return v, v < unlimited, nil
}

// parseUint reads a file holding one number (memory.peak, failcnt).
func parseUint(data []byte) (uint64, error) {
	f := kernfs.TrimSpace(data)
	v, err := kernfs.ParseUint(f)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a count", errFormat, f)
	}
	return v, nil
}

// maxCPU bounds a CPU number in a cpuset list (the kernel's NR_CPUS limit
// is 8192; a larger one is a corrupt file, not a huge node).
const maxCPU = 1 << 16

// countCPUs counts the CPUs of a cpuset list such as "0-3,8,10-11".
func countCPUs(data []byte) (int, error) {
	data = kernfs.TrimSpace(data)
	n := 0
	for len(data) > 0 {
		var part []byte
		part, data, _ = kernfs.Cut(data, ',')
		lo, hi, isRange := kernfs.Cut(part, '-')
		a, err := kernfs.ParseUint(lo)
		if err != nil || a > maxCPU {
			return 0, fmt.Errorf("%w: cpu list item %q", errFormat, part)
		}
		b := a
		if isRange {
			if b, err = kernfs.ParseUint(hi); err != nil || b < a || b > maxCPU {
				return 0, fmt.Errorf("%w: cpu list item %q", errFormat, part)
			}
		}
		n += int(b-a) + 1
	}
	return n, nil
}

// parseIOStat sums rbytes and wbytes over the devices of a cgroup v2
// io.stat ("8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0").
func parseIOStat(data []byte) (rd, wr uint64, err error) {
	for lineNo := 1; len(data) > 0; lineNo++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		dev, rest := kernfs.NextField(line)
		if len(dev) == 0 {
			continue
		}
		for {
			var f []byte
			f, rest = kernfs.NextField(rest)
			if len(f) == 0 {
				break
			}
			k, v, ok := kernfs.Cut(f, '=')
			if !ok {
				return 0, 0, fmt.Errorf("%w: line %d: %q is not key=value", errFormat, lineNo, f)
			}
			var dst *uint64
			switch string(k) {
			case "rbytes":
				dst = &rd
			case "wbytes":
				dst = &wr
			default:
				continue
			}
			x, err := kernfs.ParseUint(v)
			if err != nil {
				return 0, 0, fmt.Errorf("%w: line %d: %s %q is not a count", errFormat, lineNo, k, v)
			}
			*dst += x
		}
	}
	return rd, wr, nil
}

// parsePIDs counts the lines of a cgroup.procs, tasks or cgroup.threads
// file and, when pids is not nil, appends them to *pids while it holds
// fewer than limit.
func parsePIDs(data []byte, pids *[]int32, limit int) (int, error) {
	n := 0
	for len(data) > 0 {
		var line []byte
		line, data = kernfs.NextLine(data)
		if len(line) == 0 {
			continue
		}
		n++
		if pids == nil || len(*pids) >= limit {
			continue
		}
		v, err := kernfs.ParseUint(line)
		if err != nil || v == 0 || v > math.MaxInt32 {
			return n, fmt.Errorf("%w: %q is not a pid", errFormat, line)
		}
		*pids = append(*pids, int32(v))
	}
	return n, nil
}

// parseID reads the number of a name such as "job_123" or "uid_1001":
// prefix, then a decimal without leading zeros that fits in 32 bits
// (Slurm job ids and uids do).
func parseID(name []byte, prefix string) (uint32, bool) {
	if len(name) <= len(prefix) || string(name[:len(prefix)]) != prefix {
		return 0, false
	}
	d := name[len(prefix):]
	if len(d) > 10 || (d[0] == '0' && len(d) > 1) {
		return 0, false
	}
	v, err := kernfs.ParseUint(d)
	if err != nil || v > math.MaxUint32 {
		return 0, false
	}
	return uint32(v), true
}

// parseIO reads read_bytes and write_bytes of a /proc/<pid>/io.
func parseIO(data []byte) (rd, wr uint64, err error) {
	var v [2]uint64
	found, err := parseKeyed(data, ioKeys[:], v[:])
	if err == nil && found != 3 {
		err = fmt.Errorf("%w: want read_bytes and write_bytes", errFormat)
	}
	return v[0], v[1], err
}

var ioKeys = [2]string{"read_bytes:", "write_bytes:"}
