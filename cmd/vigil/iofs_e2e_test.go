package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/testutil"
)

// TestE2EIofsToSampler runs `vigil iofs` reporting to a real sampler's
// appio plugin: 16 writes of 64 KiB through the mount, from this process,
// show at the sampler as 1 MiB written on the mount's file system.
func TestE2EIofsToSampler(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	if os.Geteuid() != 0 {
		testutil.MissingPeer(t, "vigil iofs mounts FUSE: need root")
	}
	if f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0); err != nil {
		testutil.MissingPeer(t, "no usable /dev/fuse: %v", err)
	} else {
		f.Close()
	}
	testutil.LookPeer(t, "fusermount3", "apt-get install fuse3")
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "appio.sock")
	cfg := filepath.Join(dir, "vigil.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[plugins.appio]\nsocket = %q\n", sock)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	start(t, "sampler", "sampler", "--root", "/", "--config", cfg, "--plugins", "appio", "--interval", "200ms",
		"--listen", addr, "--node", "e2e")
	waitFor(t, 15*time.Second, "the appio socket", func() bool { _, err := os.Stat(sock); return err == nil })
	fs := start(t, "iofs", "iofs", "--source", src, "--socket", sock, "--interval", "200ms", mnt)
	waitFor(t, 15*time.Second, "the iofs mount", func() bool {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		return strings.Contains(string(b), " "+mnt+" ")
	})
	t.Cleanup(func() {
		fs.kill9()
		_ = exec.Command("fusermount3", "-uz", mnt).Run()
	})
	f, err := os.Create(filepath.Join(mnt, "out"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for range 16 {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(src, "out")); err != nil || st.Size() != 1<<20 {
		t.Fatalf("source file: %v, %v", st, err)
	}
	// The mount is younger than the sampler: it sees it from the kernel's
	// mountinfo event, not at its 10 s rescan, so the bytes are the mount's.
	var written float64
	var where string
	waitFor(t, 15*time.Second, "1 MiB written on the iofs mount at the sampler", func() bool {
		b, err := scrape("http://" + addr + "/metrics")
		if err != nil {
			return false
		}
		written, where = 0, ""
		for k, v := range parseText(t, b) {
			if strings.HasPrefix(k, "vigil_appio_bytes_total{") && strings.Contains(k, `op="write"`) && v > 0 {
				written += v
				where += k + " "
			}
		}
		return written == 1<<20
	})
	if !strings.Contains(where, fmt.Sprintf("mountpoint=%q", mnt)) || !strings.Contains(where, `fstype="fuse`) {
		t.Fatalf("written at %s; want the iofs mount %s (fuse)", where, mnt)
	}
}
