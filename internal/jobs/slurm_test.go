package jobs

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// An answer longer than maxOutput is refused, not read whole into memory
// (exec copies through io.Copy, which would use an embedded buffer's
// ReadFrom and skip the bound).
func TestCommandOutputBounded(t *testing.T) {
	if _, err := exec.LookPath("head"); err != nil {
		t.Skip("no head(1)")
	}
	p := newSlurmPoller(SlurmOptions{Timeout: 20 * time.Second}, nil)
	out, err := p.command(context.Background(), "head", "-c", "70000000", "/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Fatalf("70 MB answer: %d bytes, err %v; want refused as too long", len(out), err)
	}
	var b limitedBuffer
	b.Write(make([]byte, maxOutput+10))
	if b.buf.Len() != maxOutput || !b.over {
		t.Fatalf("buffer kept %d bytes, over %v", b.buf.Len(), b.over)
	}
	out, err = p.command(context.Background(), "head", "-c", "1000", "/dev/zero")
	if err != nil || len(out) != 1000 {
		t.Fatalf("1000-byte answer: %d bytes, %v", len(out), err)
	}
}
