package cli

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
)

func TestRecordThenReplay(t *testing.T) {
	out := filepath.Join(t.TempDir(), "rec.prom.gz")
	root := filepath.Join("..", "..", "cmd", "vigil", "testdata", "node1")
	var stdout, stderr bytes.Buffer
	err := runRecord(context.Background(), []string{"--out", out, "--root", root, "--interval", "20ms", "--duration", "60ms",
		"--plugins", "cpu,memory,load"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	rec, err := simulate.LoadRecording(out)
	if err != nil {
		t.Fatal(err)
	}
	// Three ticks of 20ms; on a loaded machine an overrun skips a tick
	// (as it should), so two ticks 40ms apart are right too.
	if !strings.Contains(stdout.String(), fmt.Sprintf("recorded %d ticks", rec.Ticks())) {
		t.Errorf("stdout %q, file has %d ticks", stdout.String(), rec.Ticks())
	}
	if n, iv := rec.Ticks(), rec.Interval(); n < 2 || n > 3 || iv < 20*time.Millisecond || iv%(20*time.Millisecond) != 0 {
		t.Fatalf("recording: %d ticks at %s, want 3 (or 2 after an overrun) on the 20ms grid", n, iv)
	}
	// The fixture's values come back: node_load1 is 0.76 in testdata/node1/proc/loadavg.
	var b metric.Batch
	simulate.NewReplayNode("cn00001", rec, 0).Sample(time.Now(), time.Second, &b)
	found := false
	for _, s := range b.Samples() {
		if s.Desc.Name == "node_load1" {
			found = true
			if s.Value != 0.76 {
				t.Errorf("node_load1 = %v", s.Value)
			}
		}
	}
	if !found || b.Len() < 50 {
		t.Errorf("replayed tick has %d samples, node_load1 found: %v", b.Len(), found)
	}
}

func TestRecordErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--out", "x", "--duration", "1ms"},
		{"--out", "x", "--plugins", "nope"},
		{"--out", filepath.Join(t.TempDir(), "no", "such", "dir", "x")},
	} {
		var stdout, stderr bytes.Buffer
		if err := runRecord(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
