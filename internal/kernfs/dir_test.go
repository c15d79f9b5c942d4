package kernfs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"testing"
)

func listNames(t *testing.T, d *Dir) map[string]uint8 {
	t.Helper()
	ents, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint8{}
	for _, e := range ents {
		got[string(e.Name)] = e.Type
	}
	return got
}

// TestDirList: entries, their types, a rewound re-list seeing changes, and
// a directory larger than the first buffer.
func TestDirList(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "eth0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bonding_masters"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("eth0", filepath.Join(root, "ib0")); err != nil {
		t.Fatal(err)
	}
	d := NewDir(root)
	defer d.Close()
	got := listNames(t, d)
	want := map[string]uint8{"eth0": DTDir, "bonding_masters": DTReg, "ib0": DTLink}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	var many []string
	for i := 0; i < 2000; i++ {
		name := fmt.Sprintf("veth%04d-with-a-long-name", i)
		many = append(many, name)
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got = listNames(t, d)
	if len(got) != 2003 {
		t.Fatalf("after adding 2000: %d entries", len(got))
	}
	sort.Strings(many)
	if _, ok := got[many[1999]]; !ok {
		t.Fatal("last entry missing")
	}
	if n := testing.AllocsPerRun(10, func() { _, _ = d.List() }); n != 0 {
		t.Fatalf("List allocates %v per call once grown", n)
	}
	if _, err := NewDir(filepath.Join(root, "missing")).List(); !os.IsNotExist(unwrap(err)) {
		t.Fatalf("missing dir: %v", err)
	}
}

func unwrap(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// TestNonBlockingDirRawOnProcFS: a NonBlocking listing of /proc/self/fd is
// read with raw syscalls, sees descriptors opened and closed between
// listings, and a fixture directory is listed normally.
func TestNonBlockingDirRawOnProcFS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux")
	}
	d := NewDir("/proc/self/fd")
	d.NonBlocking = true
	defer d.Close()
	before := len(listNames(t, d))
	if !d.raw {
		t.Fatal("NonBlocking /proc/self/fd not listed raw")
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	name := strconv.Itoa(int(f.Fd()))
	got := listNames(t, d)
	if _, ok := got[name]; !ok || len(got) != before+1 {
		t.Errorf("after opening fd %s: %d entries (before %d), %v", name, len(got), before, got)
	}
	f.Close()
	if got := listNames(t, d); len(got) != before {
		t.Errorf("after closing it: %d entries, want %d", len(got), before)
	}

	fx := NewDir(t.TempDir())
	fx.NonBlocking = true
	defer fx.Close()
	if got := listNames(t, fx); len(got) != 0 || fx.raw {
		t.Errorf("fixture dir: %v, raw %v", got, fx.raw)
	}
}

// TestDirSizeCountsProcFDs: where the kernel reports /proc/self/fd's size
// (Linux 6.2 and later), it is the number of entries a listing finds, and
// follows a descriptor opened and closed.
func TestDirSizeCountsProcFDs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux")
	}
	d := NewDir("/proc/self/fd")
	d.NonBlocking = true
	defer d.Close()
	size := func() int64 {
		t.Helper()
		n, err := d.Size()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if size() == 0 {
		t.Skip("this kernel reports no size for /proc/self/fd (before 6.2)")
	}
	if got, want := size(), int64(len(listNames(t, d))); got != want || !d.raw {
		t.Errorf("size %d, listing %d entries (raw %v)", got, want, d.raw)
	}
	before := size()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	if got := size(); got != before+1 {
		t.Errorf("after opening a file: size %d, want %d", got, before+1)
	}
	f.Close()
	if got := size(); got != before {
		t.Errorf("after closing it: size %d, want %d", got, before)
	}
}
