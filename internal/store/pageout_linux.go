package store

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxMapsBytes bounds the read of /proc/self/maps (a server maps a few
// thousand files at most: about 150 bytes a line).
const maxMapsBytes = 16 << 20

// pageOutMapped asks the kernel to reclaim the resident pages of every file
// mapping under dir (MADV_PAGEOUT). The TSDB maps its chunk files read-only
// and shared, so the pages are clean copies of the files: a later read
// faults them in again, nothing is lost. A mapping that was replaced since
// /proc/self/maps was read is at worst advised too; MADV_PAGEOUT never
// discards data (anonymous memory goes to swap or stays), unlike
// MADV_DONTNEED. It returns the bytes of the mappings advised.
//
// Why: a rollup pass reads 30 minutes of every series, most of it from the
// head's memory-mapped chunk files, and those pages would count in the
// server's RSS until the head is compacted, although nothing reads them
// again soon.
func pageOutMapped(dir string) (int64, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return pageOutFrom(io.LimitReader(f, maxMapsBytes), dir, madvisePageOut)
}

func madvisePageOut(addr, length uintptr) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, length, unix.MADV_PAGEOUT); errno != 0 {
		return errno
	}
	return nil
}

// pageOutFrom parses maps lines ("start-end perms offset dev inode path")
// and calls advise for each file mapping whose path is under dir.
func pageOutFrom(r io.Reader, dir string, advise func(addr, length uintptr) error) (int64, error) {
	prefix := []byte(dir)
	if len(prefix) == 0 || prefix[len(prefix)-1] != '/' {
		prefix = append(prefix, '/')
	}
	var total int64
	var firstErr error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Bytes()
		path, start, end, ok := parseMapsLine(line)
		if !ok || !bytes.HasPrefix(path, prefix) {
			continue
		}
		if err := advise(start, end-start); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("madvise %s: %w", path, err)
			}
			continue
		}
		total += int64(end - start)
	}
	if err := sc.Err(); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("read /proc/self/maps: %w", err)
	}
	return total, firstErr
}

// parseMapsLine returns the path and address range of one maps line; ok
// is false for lines without a path or that do not parse.
func parseMapsLine(line []byte) (path []byte, start, end uintptr, ok bool) {
	rest := line
	var fields [5][]byte
	for i := range fields {
		rest = bytes.TrimLeft(rest, " ")
		sp := bytes.IndexByte(rest, ' ')
		if sp < 0 {
			return nil, 0, 0, false
		}
		fields[i], rest = rest[:sp], rest[sp:]
	}
	path = bytes.TrimLeft(rest, " ")
	if len(path) == 0 || path[0] != '/' {
		return nil, 0, 0, false
	}
	dash := bytes.IndexByte(fields[0], '-')
	if dash < 0 {
		return nil, 0, 0, false
	}
	s, err1 := strconv.ParseUint(string(fields[0][:dash]), 16, 64)
	e, err2 := strconv.ParseUint(string(fields[0][dash+1:]), 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return nil, 0, 0, false
	}
	return path, uintptr(s), uintptr(e), true
}
