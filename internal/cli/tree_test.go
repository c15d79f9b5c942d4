package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/internal/treestatus"
)

// TestPrintTreeRedactsPassword: credentials for a --web-config server
// travel in the URL and must not reach the terminal.
func TestPrintTreeRedactsPassword(t *testing.T) {
	var b bytes.Buffer
	printTree(&b, "https://ops:s3cret@server:9090", &treestatus.Tree{})
	if out := b.String(); strings.Contains(out, "s3cret") || !strings.Contains(out, "https://ops:xxxxx@server:9090") {
		t.Fatalf("printed %q, want the password redacted", out)
	}
}
