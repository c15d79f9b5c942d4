package server

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
)

// gcPercent is the server's GOGC unless the environment sets one.
const gcPercent = 50

// passGCPercent is the GOGC while a rollup pass runs: its bursts of block
// writing and compaction would otherwise grow the heap by half the live
// heap every 30 minutes (store.RollupOptions.PassGCPercent).
const passGCPercent = 20

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
