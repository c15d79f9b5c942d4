package iofs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The mount is served by this test process, and a page fault on it must
// not happen here: a goroutine stuck in a fault is not in a system call,
// so a garbage collection waits for it forever while the fault waits for
// the server's goroutines, which the collection has stopped. Mappings are
// read by a child: this binary again, in mmapChild mode.
const mmapChildEnv = "IOFS_TEST_MMAP_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(mmapChildEnv); spec != "" {
		if err := mmapChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "mmap child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mmapChild maps path rounds times and copies it out 1 MiB at a time; with
// a reference file it also checks every byte. spec: "rounds path [ref]".
// With rounds -1 it writes the mapping instead (MAP_SHARED, msync).
func mmapChild(spec string) error {
	var rounds int
	var path, ref string
	if n, _ := fmt.Sscan(spec, &rounds, &path, &ref); n < 2 {
		return fmt.Errorf("bad spec %q", spec)
	}
	if rounds < 0 {
		return mmapWrite(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var want []byte
	if ref != "" {
		if want, err = os.ReadFile(ref); err != nil {
			return err
		}
	}
	buf := make([]byte, 1<<20)
	for range rounds {
		mp, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return err
		}
		for off := 0; off < len(mp); off += len(buf) {
			n := copy(buf, mp[off:])
			if want != nil && !bytes.Equal(buf[:n], want[off:off+n]) {
				return fmt.Errorf("bytes at %d differ from %s", off, ref)
			}
		}
		syscall.Munmap(mp)
	}
	return nil
}

func mmapWrite(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	mp, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return err
	}
	for i := range mp {
		mp[i] = byte(i % 251)
	}
	if err := unix.Msync(mp, unix.MS_SYNC); err != nil {
		return err
	}
	return syscall.Munmap(mp)
}

// runMmapChild maps path in a child process and returns its pid.
func runMmapChild(t testing.TB, rounds int, path, ref string) uint32 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), mmapChildEnv+"="+strconv.Itoa(rounds)+" "+path+" "+ref)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmap child: %v: %s", err, out)
	}
	return uint32(cmd.Process.Pid)
}
