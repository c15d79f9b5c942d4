// Package segfile lists the numbered segment files of the append-only
// stores (events, I/O records, the bus spool): each names its segments
// <number><suffix> and loads them in order at start.
package segfile

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Numbered returns the numbers of the regular files in dir named
// <number><suffix>, the number written in base, in increasing order. Other
// files are not the store's and are left alone.
func Numbered(dir, suffix string, base int) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	var out []uint64
	for _, de := range des {
		name := de.Name()
		if !de.Type().IsRegular() || !strings.HasSuffix(name, suffix) {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSuffix(name, suffix), base, 64); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}
