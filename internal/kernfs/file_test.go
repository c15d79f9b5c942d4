package kernfs

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestNonBlockingReadsRawOnlyOnProcFS: a NonBlocking file on procfs is read
// with raw preads and gives what a normal read gives; anywhere else (a
// fixture tree) it is read normally.
func TestNonBlockingReadsRawOnlyOnProcFS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs is Linux")
	}
	f := NewFile("/proc/self/stat", 16) // small: the buffer must grow
	f.NonBlocking = true
	defer f.Close()
	got, err := f.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !f.raw {
		t.Fatal("NonBlocking /proc file not read raw")
	}
	want, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields up to the state are stable between the two reads.
	if i := bytes.IndexByte(want, ')'); i < 0 || !bytes.HasPrefix(got, want[:i+3]) {
		t.Errorf("raw read %q, normal read %q", got, want)
	}

	p := filepath.Join(t.TempDir(), "stat")
	if err := os.WriteFile(p, []byte("cpu 1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := NewFile(p, 4)
	g.NonBlocking = true
	defer g.Close()
	if got, err := g.Read(); err != nil || string(got) != "cpu 1 2 3\n" || g.raw {
		t.Errorf("fixture read %q, %v, raw %v", got, err, g.raw)
	}
	// After a close, the next read reopens and decides again.
	g.Close()
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := g.Read(); err != nil || string(got) != "x" {
		t.Errorf("reread %q, %v", got, err)
	}
}

func TestLineCache(t *testing.T) {
	var c LineCache[*int]
	one, two := new(int), new(int)
	if _, ok := c.Get(0, []byte("a")); ok {
		t.Fatal("hit in an empty cache")
	}
	c.Put(2, []byte("c"), two)
	c.Put(0, []byte("a"), one)
	if v, ok := c.Get(0, []byte("a")); !ok || v != one {
		t.Error("line 0 missed")
	}
	if _, ok := c.Get(1, []byte("b")); ok {
		t.Error("line 1 was never put")
	}
	if _, ok := c.Get(2, []byte("a")); ok {
		t.Error("line 2 hit under another name (a moved line)")
	}
	if v, ok := c.Get(2, []byte("c")); !ok || v != two {
		t.Error("line 2 missed")
	}
}

// TestNonBlockingReadsRawOnSysFS: a vouched-for sysfs attribute (the
// clock source) is read raw too.
func TestNonBlockingReadsRawOnSysFS(t *testing.T) {
	const path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
	if _, err := os.Stat(path); err != nil {
		t.Skip("no sysfs clock source here")
	}
	f := NewFile(path, 64)
	f.NonBlocking = true
	defer f.Close()
	got, err := f.Read()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(path)
	if !f.raw || string(got) != string(want) {
		t.Fatalf("raw %v, read %q, want %q", f.raw, got, want)
	}
}
