//go:build linux

package appio

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// mountnsEnv names the variable under which this test binary runs inside
// a mount namespace of its own (TestWatchMountsFollowsMounts).
const mountnsEnv = "VIGIL_APPIO_IN_MOUNTNS"

// TestWatchMountsFollowsMounts mounts and unmounts a tmpfs in a mount
// namespace of its own (unshare --mount, root): the watcher reports each
// change within two seconds, stays quiet while nothing changes, and
// returns at once when its context ends (a blocking poll(2) with a timeout
// took up to that timeout).
func TestWatchMountsFollowsMounts(t *testing.T) {
	if !testutil.InNamespace(t, mountnsEnv, "--mount", "--propagation", "private") {
		return
	}
	var calls atomic.Int32
	note := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool)
	go func() {
		done <- watchMounts(ctx, "/proc/self/mountinfo", func() {
			calls.Add(1)
			note <- struct{}{}
		})
	}()
	expect := func(what string) {
		t.Helper()
		select {
		case <-note:
		case <-time.After(2 * time.Second):
			t.Fatalf("%s: no call within 2 s", what)
		}
	}
	quiet := func(what string) {
		t.Helper()
		select {
		case <-note:
			t.Fatalf("%s: called with no change to the mount table", what)
		case <-time.After(1500 * time.Millisecond):
		}
	}
	expect("start")
	// The file is readable when it joins the poller, which may report that
	// once more: a second call at the start, and none after.
	time.Sleep(200 * time.Millisecond)
	for len(note) > 0 {
		<-note
	}
	quiet("after the start")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	expect("mount")
	quiet("after the mount")
	if err := unix.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	expect("unmount")
	// Changes in a burst: each is reported, or a later call covers it.
	for range 3 {
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		if err := unix.Unmount(dir, 0); err != nil {
			t.Fatal(err)
		}
	}
	expect("burst")
	before := calls.Load()
	start := time.Now()
	cancel()
	select {
	case ok := <-done:
		if !ok {
			t.Error("watchMounts said /proc/self/mountinfo cannot be watched")
		}
	case <-time.After(250 * time.Millisecond):
		t.Fatal("watchMounts still running 250 ms after its context ended")
	}
	t.Logf("stopped in %v after %d calls", time.Since(start), before)
}

// TestWatchMountsNotProc: a fixture tree's mountinfo is a plain file, left
// to the rescan.
func TestWatchMountsNotProc(t *testing.T) {
	p := t.TempDir() + "/mountinfo"
	if err := os.WriteFile(p, []byte(mountinfo), 0o644); err != nil {
		t.Fatal(err)
	}
	if watchMounts(context.Background(), p, func() { t.Error("called") }) {
		t.Error("watching a plain file")
	}
}
