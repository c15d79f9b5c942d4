package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TmpFS mounts a tmpfs of size bytes on a new temporary directory and
// unmounts it when the test ends: a small, real file system to fill up.
// Mounting needs root; without it the test is skipped, or fails when
// VIGIL_REQUIRE_E2E=1.
func TmpFS(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		MissingPeer(t, "mounting a tmpfs needs root")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		MissingPeer(t, "mount tmpfs on %s: %v", dir, err)
	}
	// Cleanups run last-in first-out: this unmounts before TempDir removes.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a file named name in dir until the file system is full and
// returns its path; removing the file gives the space back.
func Fill(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", p, err)
			}
			buf = buf[:len(buf)/2] // top up the last partial blocks
		}
	}
	return p
}
