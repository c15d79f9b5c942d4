//go:build linux

package health

import (
	"net"
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
