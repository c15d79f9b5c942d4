package cli

import (
	"bytes"
	"context"
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
	if !strings.Contains(stdout.String(), "recorded 3 ticks") {
		t.Errorf("stdout %q", stdout.String())
	}
	rec, err := simulate.LoadRecording(out)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Ticks() != 3 || rec.Interval() != 20*time.Millisecond {
		t.Fatalf("recording: %d ticks at %s", rec.Ticks(), rec.Interval())
	}
	// The fixture's values come back: node_load1 is 0.76 in testdata/node1/proc/loadavg.
	var b metric.Batch
	simulate.NewReplayNode("cn00001", rec, 0).Sample(time.Now(), time.Second, &b)
	found := false
	for _, s := range b.Samples {
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
