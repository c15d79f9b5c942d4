package export

import (
	"bytes"
	"testing"
	"time"
)

func TestProgress(t *testing.T) {
	clock := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	p := newProgress(&buf, false, 100)
	p.now = func() time.Time { return clock }
	p.start, p.last = clock, clock
	p.add(10, 500)
	if buf.Len() != 0 {
		t.Fatalf("printed before the interval: %q", buf.String())
	}
	clock = clock.Add(10 * time.Second)
	p.add(15, 500) // 25% after 10s: 1000 rows, 100 rows/s, 30s to go
	if got, want := buf.String(), "export:  25.0%  1000 rows  100 rows/s  ETA 30s\n"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	buf.Reset()
	p.tty = true
	clock = clock.Add(10 * time.Second)
	p.add(75, 1000)
	p.finish()
	if got, want := buf.String(), "\rexport: 100.0%  2000 rows  100 rows/s  ETA 0s\x1b[K\rexport: done  2000 rows in 20s  100 rows/s\x1b[K\n"; got != want {
		t.Errorf("terminal output %q, want %q", got, want)
	}
	var silent progress
	silent.add(1, 1) // no writer: counts only, no output, no panic
}
