package filesystem

import (
	"context"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/sampler"
	"syscall"
	"testing"
)

// TestWatcher mounts a tmpfs (needs CAP_SYS_ADMIN; skipped otherwise) and
// checks that the mountinfo watcher reports the change exactly once.
func TestWatcher(t *testing.T) {
	w, err := newWatcher("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	defer w.close()
	if w.changed() {
		t.Fatal("changed right after open")
	}
	dir := t.TempDir()
	if err := syscall.Mount("vigil-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	unmounted := false
	defer func() {
		if !unmounted {
			syscall.Unmount(dir, 0)
		}
	}()
	if !w.changed() {
		t.Error("mount not noticed")
	}
	if w.changed() {
		t.Error("mount noticed twice")
	}
	if err := syscall.Unmount(dir, 0); err != nil {
		t.Fatal(err)
	}
	unmounted = true
	if !w.changed() {
		t.Error("unmount not noticed")
	}
}

// TestNewMountSeenAtOnce: on the real mount table, a mount made between two
// ticks is reported on the second one although mount_refresh has not passed.
func TestNewMountSeenAtOnce(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{MountRefresh: sampler.Duration(time.Hour), StatTimeout: sampler.Duration(time.Second), MaxMounts: 100000}
	p := New(cfg)
	if err := p.Init(sampler.Env{FS: kernfs.NewFS("/")}); err != nil {
		t.Skip(err)
	}
	defer p.Close()
	now := time.Now()
	has := func() bool {
		var b metric.Batch
		if err := p.Sample(context.Background(), now, &b); err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples() {
			if s.Desc.Labels[2].Value == dir {
				return true
			}
		}
		return false
	}
	if has() {
		t.Fatal("mounted before the mount")
	}
	if err := syscall.Mount("vigil-test", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	defer syscall.Unmount(dir, 0)
	if !has() {
		t.Error("new mount not reported on the next tick")
	}
}
