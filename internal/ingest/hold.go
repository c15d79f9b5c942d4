package ingest

import (
	"errors"
	"time"
)

// DefaultMaxHold bounds how long one frame waits for a store that cannot
// write; then its connection is closed unacknowledged and the sender
// records its unacknowledged ticks as gaps. Held, a sender loses nothing
// until its own queue (8 MiB by default) overflows, hours for a node.
const DefaultMaxHold = time.Hour

// temporary reports an error the store says will pass (a full disk), so
// the append is worth retrying rather than dropping.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// hold runs store until it succeeds or fails for good. While the store
// cannot write for now it retries, holding the connection's frame: the
// frame is not acknowledged, so its sender keeps it, and TCP makes the
// sender wait. A frame given up on (at shutdown, after maxHold) counts as
// unkept, which makes the wire server close the connection before
// acknowledging it.
func (h *Handler) hold(store func() error) error {
	err := store()
	if err == nil || !temporary(err) {
		return err
	}
	h.stats.Errors.Add(1)
	if h.holding.Add(1) == 1 { // once per episode: the store logs why
		h.log.Warn("store cannot write: holding the stream unacknowledged until it can", "err", err)
	}
	defer h.holding.Add(-1)
	deadline := time.Now().Add(h.maxHold)
	wait := 10 * time.Millisecond
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			h.unkept.Add(1)
			return err
		case <-t.C:
		}
		if err = store(); err == nil || !temporary(err) {
			return err
		}
		if time.Now().After(deadline) {
			h.unkept.Add(1)
			return err
		}
		wait = min(2*wait, time.Second)
		t.Reset(wait)
	}
}

// Unkept counts the frames the store could not take and that were given up
// on; the wire server closes a connection, unacknowledged, when it moves
// during the connection's frame (wire.Keeper).
func (h *Handler) Unkept() uint64 { return h.unkept.Load() }
