package sampler

import (
	"context"
	"time"
)

// waiter blocks a group's goroutine until its next tick.
type waiter interface {
	// wait returns when the wall clock has reached next (or it was set,
	// which the caller notices by looking at the clock), with ctx.Err()
	// once ctx is done, or with another error if the waiter broke.
	wait(ctx context.Context, next time.Time) error
	close() error
}

// goTimer waits on a Go timer: portable, and the only waiter that follows
// the fake clock of testing/synctest.
type goTimer struct{ t *time.Timer }

func newGoTimer() *goTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &goTimer{t: t}
}

func (g *goTimer) wait(ctx context.Context, next time.Time) error {
	g.t.Reset(time.Until(next))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-g.t.C:
		return nil
	}
}

func (g *goTimer) close() error {
	g.t.Stop()
	return nil
}
