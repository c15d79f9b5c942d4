package wire

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

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

// heartbeatEvery is how often a receiver holding a frame (a Keeper whose
// store cannot write) repeats its last Ack, well within a sender's write
// timeout (10 s by default).
const heartbeatEvery = time.Second

// holdBeat tells the sender that a receiver holding a frame is alive: the
// sender's write blocks while the receiver reads nothing, and each Ack
// moves the sender's write deadline, so it waits instead of dropping the
// connection and counting its unacknowledged ticks as lost.
type holdBeat struct {
	conn  net.Conn
	mu    sync.Mutex   // serialises Ack writes with readLoop's
	busy  atomic.Int64 // Unix ns when handling the current frame began; 0: idle
	acked atomic.Uint64
	stop  chan struct{}
	done  chan struct{}
}

func newHoldBeat(conn net.Conn) *holdBeat {
	b := &holdBeat{conn: conn, stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *holdBeat) run() {
	defer close(b.done)
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	var frame []byte
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			if s := b.busy.Load(); s == 0 || now.UnixNano()-s < int64(heartbeatEvery) {
				continue
			}
			frame = appendFrame(frame[:0], frameAck, binary.AppendUvarint(nil, b.acked.Load()))
			b.mu.Lock()
			_ = b.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, err := b.conn.Write(frame)
			b.mu.Unlock()
			if err != nil {
				return
			}
		}
	}
}

func (b *holdBeat) close() {
	close(b.stop)
	<-b.done
}
