package export

import (
	"fmt"
	"io"
	"time"
)

// progress prints "% done, rows, rate, ETA" at most every interval: on a
// terminal as one line rewritten in place, elsewhere (--progress into a
// log) as a line each time.
type progress struct {
	w        io.Writer // nil: silent
	tty      bool
	total    int // work units: steps × queries per chunk
	done     int
	rows     int
	start    time.Time
	last     time.Time
	interval time.Duration
	now      func() time.Time
}

func newProgress(w io.Writer, tty bool, total int) *progress {
	p := &progress{w: w, tty: tty, total: max(total, 1), now: time.Now, interval: 5 * time.Second}
	if tty {
		p.interval = 250 * time.Millisecond
	}
	p.start = p.now()
	p.last = p.start
	return p
}

func (p *progress) add(units, rows int) {
	p.done += units
	p.rows += rows
	if p.w == nil {
		return
	}
	if now := p.now(); now.Sub(p.last) >= p.interval {
		p.last = now
		p.print(false)
	}
}

func (p *progress) finish() {
	if p.w != nil {
		p.print(true)
	}
}

func (p *progress) print(final bool) {
	el := p.now().Sub(p.start)
	frac := float64(p.done) / float64(p.total)
	rate := 0.0
	if s := el.Seconds(); s > 0 {
		rate = float64(p.rows) / s
	}
	eta := "?"
	if frac > 0 {
		eta = (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
	}
	line := fmt.Sprintf("export: %5.1f%%  %d rows  %.0f rows/s  ETA %s", 100*frac, p.rows, rate, eta)
	if final {
		line = fmt.Sprintf("export: done  %d rows in %s  %.0f rows/s", p.rows, el.Round(time.Millisecond), rate)
	}
	switch {
	case p.tty && final:
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}
