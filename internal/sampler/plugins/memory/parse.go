package memory

import (
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Field is one line of /proc/meminfo.
type Field struct {
	Name  []byte // as written, e.g. "Active(anon)"; points into the parsed data
	Value int64
	KB    bool // the value carried the kB unit
}

// ErrFormat marks a line that does not look like a meminfo line.
var ErrFormat = errors.New("unexpected format")

// Parse appends the fields of /proc/meminfo content to dst[:0] without
// allocating once dst has grown. A bad line is skipped and the scan goes
// on; the first problem is returned, naming its line.
func Parse(data []byte, dst []Field) ([]Field, error) {
	dst = dst[:0]
	var first error
	bad := 0
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		if len(kernfs.TrimSpace(line)) == 0 {
			continue
		}
		f, err := parseLine(line)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("line %d %q: %w", n, truncate(line), err)
			}
			bad++
			continue
		}
		dst = append(dst, f)
	}
	if len(dst) == 0 && first == nil {
		return dst, fmt.Errorf("no fields: %w", ErrFormat)
	}
	if bad > 1 {
		first = fmt.Errorf("%w (and %d more bad lines)", first, bad-1)
	}
	return dst, first
}

// parseLine parses "Name:   123 kB" or "Name:   123".
func parseLine(line []byte) (Field, error) {
	var f Field
	name, rest, ok := kernfs.Cut(line, ':')
	name = kernfs.TrimSpace(name)
	if !ok || len(name) == 0 || hasBlank(name) {
		return f, fmt.Errorf("want \"Name: value [kB]\": %w", ErrFormat)
	}
	f.Name = name
	var val, unit, extra []byte
	val, rest = kernfs.NextField(rest)
	unit, rest = kernfs.NextField(rest)
	extra, _ = kernfs.NextField(rest)
	v, err := kernfs.ParseInt(val)
	if err != nil {
		return f, fmt.Errorf("value %q: %w", val, err)
	}
	f.Value = v
	switch {
	case len(extra) != 0:
		return f, fmt.Errorf("trailing %q: %w", extra, ErrFormat)
	case len(unit) == 0:
	case string(unit) == "kB":
		f.KB = true
	default:
		return f, fmt.Errorf("unit %q, want kB or none: %w", unit, ErrFormat)
	}
	return f, nil
}

func hasBlank(b []byte) bool {
	for _, c := range b {
		if c == ' ' || c == '\t' {
			return true
		}
	}
	return false
}

func truncate(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}
