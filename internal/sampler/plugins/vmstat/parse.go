package vmstat

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

// Field is one line of /proc/vmstat.
type Field struct {
	Name  []byte // points into the parsed data
	Value int64  // some per-node counters can read slightly negative
}

// ErrFormat marks a line that is not "name value".
var ErrFormat = errors.New("unexpected format")

// Parse appends the fields of /proc/vmstat content to dst[:0] without
// allocating once dst has grown. A bad line is skipped and the scan goes
// on; the first problem is returned, naming its line.
func Parse(data []byte, dst []Field) ([]Field, error) {
	dst = dst[:0]
	var first error
	bad := 0
	for n := 1; len(data) > 0; n++ {
		var line []byte
		line, data = kernfs.NextLine(data)
		// Nearly every line is "name value": one search for the blank and
		// the number, where splitting into fields costs a third of the
		// plugin's user time at 10 Hz. Anything else takes the general way.
		if i := bytes.IndexByte(line, ' '); i > 0 && bytes.IndexByte(line[:i], '\t') < 0 {
			if v, err := kernfs.ParseInt(line[i+1:]); err == nil {
				dst = append(dst, Field{Name: line[:i], Value: v})
				continue
			}
		}
		var f [3][]byte
		k := kernfs.Fields(line, f[:])
		if k == 0 {
			continue
		}
		var err error
		var v int64
		if k != 2 {
			err = fmt.Errorf("%d fields, want \"name value\": %w", k, ErrFormat)
		} else if v, err = kernfs.ParseInt(f[1]); err != nil {
			err = fmt.Errorf("value %q: %w", f[1], err)
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("line %d %q: %w", n, truncate(line), err)
			}
			bad++
			continue
		}
		dst = append(dst, Field{Name: f[0], Value: v})
	}
	if len(dst) == 0 && first == nil {
		return dst, fmt.Errorf("no fields: %w", ErrFormat)
	}
	if bad > 1 {
		first = fmt.Errorf("%w (and %d more bad lines)", first, bad-1)
	}
	return dst, first
}

func truncate(b []byte) []byte {
	if len(b) > 60 {
		return b[:60]
	}
	return b
}
