package wire

import (
	"context"
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
	conn          net.Conn
	send          *frameMAC    // a keyed session's tags (nil: CRC); guarded by mu
	mu            sync.Mutex   // serialises Ack writes with readLoop's
	busy          atomic.Int64 // Unix ns when handling the current frame began; 0: idle
	acked         atomic.Uint64
	frame, sealed []byte // guarded by mu
}

// beat repeats the last Ack if the current frame has been held a while.
func (b *holdBeat) beat(now time.Time) {
	if s := b.busy.Load(); s == 0 || now.UnixNano()-s < int64(heartbeatEvery) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.frame = appendFrame(b.frame[:0], frameAck, binary.AppendUvarint(nil, b.acked.Load()))
	b.sealed = b.send.seal(b.sealed[:0], b.frame)
	_ = b.conn.SetWriteDeadline(now.Add(heartbeatEvery))
	if _, err := b.conn.Write(b.sealed); err != nil {
		b.conn.Close() // a partial frame would corrupt the stream
	}
}

// beatSet is a server's connections that may hold frames; one goroutine
// beats for all of them, so idle connections cost no timer.
type beatSet struct {
	mu  sync.Mutex
	set map[*holdBeat]struct{}
}

func (s *beatSet) add(conn net.Conn, send *frameMAC) *holdBeat {
	b := &holdBeat{conn: conn, send: send}
	s.mu.Lock()
	s.set[b] = struct{}{}
	s.mu.Unlock()
	return b
}

func (s *beatSet) remove(b *holdBeat) {
	s.mu.Lock()
	delete(s.set, b)
	s.mu.Unlock()
}

func (s *beatSet) run(ctx context.Context) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	var busy []*holdBeat
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			busy = busy[:0]
			s.mu.Lock()
			for b := range s.set {
				if b.busy.Load() != 0 {
					busy = append(busy, b)
				}
			}
			s.mu.Unlock()
			for _, b := range busy {
				b.beat(now)
			}
			clear(busy)
		}
	}
}
