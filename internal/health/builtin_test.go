//go:build linux

package health

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/kernfs"
)

func TestTCPPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	o, _ := runCfg(t, CheckConfig{Name: "p", Type: "tcp_port", Address: addr})
	if !o.ok {
		t.Fatalf("listening: %+v", o)
	}
	ln.Close()
	o, _ = runCfg(t, CheckConfig{Name: "p", Type: "tcp_port", Address: addr})
	if o.ok || o.timedOut || !strings.Contains(o.reason, "connect "+addr+": connection refused") {
		t.Fatalf("closed: %+v", o)
	}
}

func TestFreeSpace(t *testing.T) {
	dir := t.TempDir()
	cs, err := Compile([]CheckConfig{
		{Name: "any", Type: "free_space", Path: "/", MinFree: "0%"},
		{Name: "all", Type: "free_space", Path: "/", MinFree: "100%"},
		{Name: "huge", Type: "free_space", Path: "/", MinFree: "1000P"},
		{Name: "small", Type: "free_space", Path: "/", MinFree: "1k"},
		{Name: "gone", Type: "free_space", Path: "/nonexistent", MinFree: "1k"},
	}, time.Minute, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(cs, kernfs.NewFS(dir), 1, nil)
	r.RunAll(t.Context())
	st := r.Snapshot(nil)
	for i, want := range []string{"", "/: less than 100% free", "/: ", "", "statfs /nonexistent: no such file or directory"} {
		if (want == "") != st[i].OK || !strings.HasPrefix(st[i].Reason, want) {
			t.Errorf("%s: %+v, want reason %q", st[i].Name, st[i], want)
		}
	}
	if !strings.Contains(st[2].Reason, "/: less than 1000.0PiB free") {
		t.Errorf("huge: %q", st[2].Reason)
	}
}

// TestProcessRestarted: a process found again under a new pid, and one
// gone, are seen at the next run without waiting for the cache to age.
func TestProcessRestarted(t *testing.T) {
	root := t.TempDir()
	put := func(pid, comm string) {
		dir := filepath.Join(root, "proc", pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "comm"), []byte(comm+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("1", "systemd")
	put("10", "slurmd")
	cs, err := Compile([]CheckConfig{{Name: "slurmd", Type: "process", Process: "slurmd"}, {Name: "munged", Type: "process", Process: "munged"}}, time.Minute, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(cs, kernfs.NewFS(root), 1, nil)
	run := func() (bool, bool) {
		for i, c := range cs {
			o := c.run(t.Context(), &r.env)
			r.mu.Lock()
			r.record(i, o, 0)
			r.mu.Unlock()
		}
		st := r.Snapshot(nil)
		return st[0].OK, st[1].OK
	}
	if a, b := run(); !a || b {
		t.Fatalf("first: slurmd %v munged %v", a, b)
	}
	if err := os.RemoveAll(filepath.Join(root, "proc", "10")); err != nil {
		t.Fatal(err)
	}
	put("20", "slurmd")
	put("30", "munged")
	if a, b := run(); !a {
		t.Fatalf("restarted slurmd not found (munged %v)", b)
	}
	if err := os.RemoveAll(filepath.Join(root, "proc", "20")); err != nil {
		t.Fatal(err)
	}
	if a, _ := run(); a {
		t.Fatal("stopped slurmd still reported running")
	}
}
