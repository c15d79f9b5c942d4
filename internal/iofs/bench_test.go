package iofs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkThroughput reads one file whole, in 1 MiB read() calls or by
// copying 1 MiB at a time out of a fresh MAP_SHARED mapping (in a child
// process, whose start is timed in both cases), from the
// source directory (direct) and through the iofs mount, side by side.
// warm: the source file is in the page cache (what is measured is the cost
// of the FUSE round trips and copies); cold: its pages are dropped from the
// cache (POSIX_FADV_DONTNEED on that file only) before each pass, so both
// read the disk. IOFS_BENCH_MB sets the file size (default 256).
//
//	go test -c -o /tmp/iofs.test ./internal/iofs/
//	/tmp/iofs.test -test.run '^$' -test.bench Throughput -test.benchtime 5x
func BenchmarkThroughput(b *testing.B) {
	m := mountT(b, filepath.Join(b.TempDir(), "none.sock"))
	mb := 256
	if s := os.Getenv("IOFS_BENCH_MB"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			mb = v
		}
	}
	size := int64(mb) << 20
	src := filepath.Join(m.src, "big")
	f, err := os.Create(src)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	for range mb {
		if _, err := f.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	f.Sync()
	f.Close()
	for _, cache := range []string{"warm", "cold"} {
		for _, mode := range []string{"read1M", "mmap"} {
			for _, where := range []struct{ name, dir string }{{"direct", m.src}, {"iofs", m.mnt}} {
				b.Run(cache+"/"+mode+"/"+where.name, func(b *testing.B) {
					b.SetBytes(size)
					p := filepath.Join(where.dir, "big")
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						if cache == "cold" {
							dropCache(b, src)
						} else if i == 0 {
							passRead(b, src, chunk, size) // load the cache
						}
						b.StartTimer()
						if mode == "read1M" {
							passRead(b, p, chunk, size)
						} else {
							passMmap(b, p)
						}
					}
				})
			}
		}
	}
}

func passRead(b *testing.B, p string, buf []byte, size int64) {
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var total int64
	for {
		n, err := f.Read(buf)
		total += int64(n)
		if n == 0 || err != nil {
			break
		}
	}
	if total != size {
		b.Fatalf("read %d bytes of %d", total, size)
	}
}

// passMmap maps the file in a child process: a fault on the mount must not
// happen in the process serving it (main_test.go).
func passMmap(b *testing.B, p string) { runMmapChild(b, 1, p, "") }

func dropCache(b *testing.B, p string) {
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}
