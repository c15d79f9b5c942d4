package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

func TestIofsErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{dir}, "--source DIR is required"},
		{[]string{"--source", filepath.Join(dir, "nope"), dir}, "--source: stat"},
		{[]string{"--source", dir}, "MOUNTPOINT argument is required"},
		{[]string{"--source", dir, file}, "not a directory"},
		{[]string{"--source", dir, filepath.Join(dir, "missing")}, "mount point: stat"},
		{[]string{"--source", dir, "--interval", "1ms", dir}, "--interval 1ms"},
		{[]string{"--source", dir, dir, "extra"}, `unexpected argument "extra"`},
	} {
		var stderr bytes.Buffer
		code := Main(context.Background(), append([]string{"iofs"}, c.args...), &bytes.Buffer{}, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("iofs %q: exit %d, stderr %q; want an error with %q", c.args, code, stderr.String(), c.want)
		}
	}
}

// TestIofsRunStops mounts with the command, then checks both ways it ends:
// stopped (the signal context) it unmounts; unmounted from outside with
// fusermount3 -u it returns.
func TestIofsRunStops(t *testing.T) {
	if os.Geteuid() != 0 {
		testutil.MissingPeer(t, "vigil iofs mounts FUSE: need root")
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		testutil.MissingPeer(t, "no usable /dev/fuse: %v", err)
	} else {
		f.Close()
	}
	fm := testutil.LookPeer(t, "fusermount3", "apt-get install fuse3")
	for _, external := range []bool{false, true} {
		dir := t.TempDir()
		src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
		os.Mkdir(src, 0o755)
		os.Mkdir(mnt, 0o755)
		if err := os.WriteFile(filepath.Join(src, "hello"), []byte("hi"), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stderr := &testutil.SyncBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- Main(ctx, []string{"iofs", "--source", src, "--socket", filepath.Join(dir, "none.sock"), mnt}, &bytes.Buffer{}, stderr)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if b, err := os.ReadFile(filepath.Join(mnt, "hello")); err == nil && string(b) == "hi" {
				break
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("mount not serving after 10s: %s", stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if external {
			if out, err := exec.Command(fm, "-u", mnt).CombinedOutput(); err != nil {
				t.Fatalf("fusermount3 -u: %v: %s", err, out)
			}
		} else {
			cancel()
		}
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("external=%v: exit %d: %s", external, code, stderr.String())
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("external=%v: still running 15s after the stop", external)
		}
		cancel()
		if b, _ := os.ReadFile("/proc/self/mounts"); bytes.Contains(b, []byte(" "+mnt+" ")) {
			t.Errorf("external=%v: %s still mounted", external, mnt)
		}
	}
}
