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

// TestLogsMineSyslogFile mines lines of a syslog file: the header (a
// log file's, RFC 3164 with PRI, RFC 5424) is stripped so that timestamps
// and hosts are not mined, the app name stays as the server mines it, and
// -strip-header=false keeps lines whole.
func TestLogsMineSyslogFile(t *testing.T) {
	in := strings.Join([]string{
		"Jan  5 09:59:58 cn01 sshd[4242]: Accepted publickey for bob from 10.0.0.1 port 22 ssh2",
		"Nov 25 13:17:56 cn02 sshd[17]: Accepted publickey for alice from 10.0.0.2 port 40022 ssh2",
		"2026-01-05T09:59:58.123456+00:00 cn03 sshd[9]: Accepted publickey for carol from 10.0.0.3 port 22 ssh2",
		"<38>Jan  5 10:00:00 cn04 sshd[1]: Accepted publickey for dave from 10.0.0.4 port 22 ssh2",
		"<38>1 2026-01-05T10:00:00Z cn05 sshd 77 - - Accepted publickey for erin from 10.0.0.5 port 22 ssh2",
		"NameSystem.delete: blk_1 is added to invalidSet", // no header: kept whole
	}, "\n")
	want := "sshd: Accepted publickey for <*> from <*> port <*> ssh2"
	var out, errb bytes.Buffer
	if err := runLogs(context.Background(), []string{"mine"}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatalf("logs mine: %v (stderr %q)", err, errb.String())
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != 6 {
		t.Fatalf("%d output lines, want 6: %q", len(got), got)
	}
	for i, g := range got[:5] {
		if g != want {
			t.Errorf("line %d: %q, want %q", i+1, g, want)
		}
	}
	if got[5] != "NameSystem.delete: <*> is added to invalidSet" {
		t.Errorf("line without header: %q", got[5])
	}
	out.Reset()
	if err := runLogs(context.Background(), []string{"mine", "-strip-header=false"}, strings.NewReader(in), &out, &errb); err != nil {
		t.Fatal(err)
	}
	if first := strings.SplitN(out.String(), "\n", 2)[0]; strings.HasPrefix(first, "sshd:") {
		t.Errorf("-strip-header=false: %q, want the header mined", first)
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
