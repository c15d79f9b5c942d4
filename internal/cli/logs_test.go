package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLogsMine(t *testing.T) {
	long := strings.Repeat("x", 1<<20) // longer than the reader's buffer
	in := strings.Join([]string{
		"Node 12 power budget exceeded! Power=310, Limit=300",
		"disk full",
		"Node 7 power budget exceeded! Power=402, Limit=350",
		"bad \xff\xfe utf8",
		"",
		long,
		"last line without newline",
	}, "\n")
	var out, errb bytes.Buffer
	if err := runLogs(context.Background(), []string{"mine"}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("logs mine: %v (stderr %q)", err, errb.String())
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 7 {
		t.Fatalf("%d output lines, want 7: %q", len(got), got)
	}
	node := "Node <*> power budget exceeded! Power=<*>, Limit=<*>"
	if got[0] != node || got[2] != node {
		t.Errorf("lines 1 and 3 = %q, %q; want %q", got[0], got[2], node)
	}
	if got[1] != "disk full" || got[6] != "last line without newline" {
		t.Errorf("constant lines = %q, %q", got[1], got[6])
	}
	if len(got[5]) > 64<<10 {
		t.Errorf("long line template is %d bytes, want at most the 64 KiB mined", len(got[5]))
	}
}

func TestLogsUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runLogs(context.Background(), []string{"nope"}, strings.NewReader(""), &out, &errb); err == nil {
		t.Error("unknown subcommand: want an error")
	}
	if !strings.Contains(errb.String(), "mine") {
		t.Errorf("usage does not list mine: %q", errb.String())
	}
	if err := runLogs(context.Background(), []string{"mine", "extra"}, strings.NewReader(""), &out, &errb); err == nil {
		t.Error("extra argument: want an error")
	}
}
