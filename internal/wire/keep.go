package wire

import "errors"

// Keeper is implemented by a Handler that can fail to keep a frame for a
// while (a server whose store cannot write). Serve reads Unkept before and
// after handling each frame; if it moved, the frame may be lost, so the
// connection is closed before that frame is acknowledged and the sender
// does not count it as delivered.
type Keeper interface {
	// Unkept counts frames the handler gave up on, over all connections.
	Unkept() uint64
}

// ErrNotKept ends a connection whose frame the handler could not keep.
var ErrNotKept = errors.New("receiver could not keep a frame (store not writable)")
