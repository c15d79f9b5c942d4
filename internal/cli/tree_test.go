package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/internal/treestatus"
)

func TestPrintTreeClockSkew(t *testing.T) {
	var b strings.Builder
	printTree(&b, "http://s", &treestatus.Tree{NodesUp: 3, NodesClockSkew: 3,
		ClockSkew: []treestatus.NodeClock{{Node: "fast", OffsetSeconds: 7200.2}, {Node: "slow", OffsetSeconds: -3600}}})
	want := "server http://s: 3 nodes up, 0 down, 0 aggregators\n" +
		"CLOCK SKEW: 3 nodes (ticks refused or misplaced; fix their clocks)\n" +
		"  fast [clock skew] 2h0m0s ahead\n" +
		"  slow [clock skew] 1h0m0s behind\n" +
		"  … and 1 more\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	b.Reset()
	printTree(&b, "http://s", &treestatus.Tree{NodesUp: 1})
	if strings.Contains(b.String(), "CLOCK") {
		t.Errorf("no skew, yet: %s", b.String())
	}
}

// TestPrintTreeRedactsPassword: credentials for a --web-config server
// travel in the URL and must not reach the terminal.
func TestPrintTreeRedactsPassword(t *testing.T) {
	var b bytes.Buffer
	printTree(&b, "https://ops:s3cret@server:9090", &treestatus.Tree{})
	if out := b.String(); strings.Contains(out, "s3cret") || !strings.Contains(out, "https://ops:xxxxx@server:9090") {
		t.Fatalf("printed %q, want the password redacted", out)
	}
}

// TestPrintTreeNamesDown: tree status names the down nodes, never
// connected ones included, as host ranges.
func TestPrintTreeNamesDown(t *testing.T) {
	var b strings.Builder
	printTree(&b, "http://s", &treestatus.Tree{NodesUp: 3, NodesDown: 3, Down: []string{"cn004", "cn005", "login"}, DownRanges: []string{"cn[004-005]", "login"}})
	want := "server http://s: 3 nodes up, 3 down, 0 aggregators\n" +
		"DOWN: cn[004-005] login\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	b.Reset()
	printTree(&b, "http://s", &treestatus.Tree{NodesDown: 3, Down: []string{"a1"}, DownRanges: []string{"a1"}})
	if got := b.String(); !strings.Contains(got, "DOWN: a1 … and 2 more\n") {
		t.Errorf("truncated list: got %q", got)
	}
}
