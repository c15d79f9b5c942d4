package drain

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeScontrol writes a shell script standing in for scontrol.
func fakeScontrol(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scontrol")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSlurmCommands: the arguments scontrol gets, its answers read, and
// its failures told apart: an unknown node, a missing scontrol, a hang.
func TestSlurmCommands(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	ctx := context.Background()
	args := filepath.Join(t.TempDir(), "args")
	s := &Slurm{Scontrol: fakeScontrol(t, `printf '%s|' "$@" >> `+args+`; echo >> `+args+`
case "$1$4" in
update*) ;;
-ocn1) echo 'NodeName=cn1 Arch=x86_64 State=MIXED+DRAIN Weight=1 Reason=vigil: a: b [slurm@2026-11-25T18:00:00]';;
*) echo "Node $4 not found" >&2; exit 1;;
esac`)}
	i, err := s.Node(ctx, "cn1")
	if err != nil || i.State != "MIXED+DRAIN" || i.Reason != "vigil: a: b" {
		t.Fatalf("Node(cn1) = %+v, %v", i, err)
	}
	if _, err := s.Node(ctx, "cn9"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Node(cn9): %v, want ErrNoNode", err)
	}
	if err := s.Drain(ctx, "cn1", "vigil: scratch: read-only; x=1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(ctx, "cn1"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(args)
	want := "-o|show|node|cn1|\n-o|show|node|cn9|\nupdate|NodeName=cn1|State=DRAIN|Reason=vigil: scratch: read-only; x=1|\nupdate|NodeName=cn1|State=RESUME|\n"
	if string(b) != want {
		t.Fatalf("scontrol was run with\n%s\nwant\n%s", b, want)
	}

	missing := &Slurm{Scontrol: filepath.Join(t.TempDir(), "no-scontrol")}
	if _, err := missing.Node(ctx, "cn1"); err == nil || errors.Is(err, ErrNoNode) {
		t.Fatalf("missing scontrol: %v, want an error to retry, not ErrNoNode", err)
	}
	hang := &Slurm{Scontrol: fakeScontrol(t, "exec sleep 30"), Timeout: 100 * time.Millisecond}
	start := time.Now()
	err = hang.Drain(ctx, "cn1", "vigil: x")
	if err == nil || !strings.Contains(err.Error(), "no answer within") || time.Since(start) > 5*time.Second {
		t.Fatalf("hung scontrol: %v after %v", err, time.Since(start))
	}
	flood := &Slurm{Scontrol: fakeScontrol(t, "head -c 3000000 /dev/zero")}
	if _, err := flood.Node(ctx, "cn1"); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("2 MB answer: %v", err)
	}
}
