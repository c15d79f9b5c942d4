// Package gctune sets the Go garbage collector's target for daemons whose
// live heap is large and slowly allocated (the server's TSDB head, an
// aggregator's copies of its nodes' tables): collecting before the heap
// doubles costs them little CPU and keeps RSS near the live heap. GOGC and
// GOMEMLIMIT in the environment win.
package gctune

import (
	"bufio"
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// GOGCSet reports whether the environment sets GOGC, which then wins over
// any target a daemon would choose.
func GOGCSet() bool { return os.Getenv("GOGC") != "" }

// Apply sets the GC target to gcPercent unless GOGC is set and, under a
// cgroup memory limit, lets the heap use most of it before the GC works
// harder, instead of growing to twice the live heap and being killed,
// unless GOMEMLIMIT is set.
func Apply(log *slog.Logger, gcPercent int) {
	if !GOGCSet() {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if l := cgroupMemoryLimit(os.ReadFile); l > 0 {
			debug.SetMemoryLimit(int64(float64(l) * memLimitRatio))
			log.Info("Go memory limit set from the cgroup's", "cgroup_bytes", l, "ratio", memLimitRatio)
		}
	}
}

// memLimitRatio is the share of a cgroup memory limit the Go heap may
// grow to before the garbage collector works harder; Prometheus'
// --auto-gomemlimit uses the same 0.9, leaving room for what the runtime
// does not count (mmapped chunks, stacks).
const memLimitRatio = 0.9

// cgroupMemoryLimit returns the memory limit of the cgroup this process
// runs in (cgroup v2 memory.max, else v1 memory.limit_in_bytes), 0 when
// there is none. readFile is os.ReadFile; the root is /sys/fs/cgroup.
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	const root = "/sys/fs/cgroup"
	var v1, v2 string // this process's cgroup paths
	if b, err := readFile("/proc/self/cgroup"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// hierarchy-ID:controller-list:path
			f := strings.SplitN(sc.Text(), ":", 3)
			if len(f) != 3 {
				continue
			}
			switch {
			case f[0] == "0" && f[1] == "":
				v2 = f[2]
			case strings.Contains(","+f[1]+",", ",memory,"):
				v1 = f[2]
			}
		}
	}
	// A container sees its own cgroup at the root, and the path in
	// /proc/self/cgroup may be the host's: try both.
	for _, p := range []string{
		filepath.Join(root, v2, "memory.max"), filepath.Join(root, "memory.max"),
		filepath.Join(root, "memory", v1, "memory.limit_in_bytes"), filepath.Join(root, "memory", "memory.limit_in_bytes"),
	} {
		b, err := readFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		n, err := strconv.ParseInt(s, 10, 64)
		if s == "max" || err != nil || n <= 0 || n >= 1<<60 {
			return 0 // unlimited (v1 writes a page-rounded MaxInt64)
		}
		return n
	}
	return 0
}
