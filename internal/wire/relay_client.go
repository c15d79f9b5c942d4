package wire

import (
	"time"
)

// NewRelayStream adds a node stream for RelaySchema and Relay.
func (c *Client) NewRelayStream(node string) *ClientStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := &relayStream{}
	c.enc.addStream(&rs.s, node)
	rs.cs.s = &rs.s
	return &rs.cs
}

// relayStream is a relayed stream's client and encoder state in one
// allocation: every relayed tick reads the first fields of both, and an
// aggregator's thousands of streams are cold in cache.
type relayStream struct {
	cs ClientStream
	s  Stream
}

// RelaySchema queues a schema frame of rs as its sender coded it (sc from
// RelayHandler), so that the upstream's table of rs stays the sender's
// and the sender's values frames can go on as they are. It queues nothing
// when rs does not relay sc's source in step; its next keyframe then
// starts rs over (Relay).
func (c *Client) RelaySchema(rs *ClientStream, sc *RelaySchema) {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := c.take() // may drop queued ticks of rs: decide after it
	if !rs.inSync || rs.s.epoch != c.enc.epoch || rs.source != sc.Source {
		if rs.source == sc.Source {
			rs.inSync = false
		}
		c.sq.release(buf)
		return
	}
	buf = c.enc.AppendRelaySchema(buf, rs.s, sc)
	rs.s.valuesAt = len(buf) // no values: not a tick
	c.push(entry{buf: buf, cs: rs}, nil)
}

// Relay queues one tick of rs as its sender coded it (an aggregator passing
// a child's frame on, f from RelayHandler), so it is not encoded again.
// When the upstream lacks the state the frame was coded against (a new
// connection, a dropped tick, another source) and the frame is no
// keyframe, the tick cannot be passed on: it is counted as dropped and
// reported as a gap, Relay reports false and sets f.WantKey, so the
// sender is asked for a keyframe. From that keyframe on, relaying goes on.
// Relay wakes the writer only once relayFlushBytes are queued: the caller
// calls Flush when its input is drained.
func (c *Client) Relay(rs *ClientStream, t time.Time, f *RelayFrame) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := c.take() // may drop queued ticks of rs: decide after it
	restart := !rs.inSync || rs.s.epoch != c.enc.epoch || rs.source != f.Source
	if restart && !f.Key {
		if rs.source == f.Source {
			rs.inSync = false
		}
		c.sq.release(buf)
		rs.noteGap(t)
		c.stats.Dropped.Add(1)
		f.WantKey = true
		return false
	}
	// The upstream asked for a keyframe of rs (it lost its state): pass
	// the request on to the sender.
	f.WantKey = rs.s.forceKey
	buf = c.enc.AppendRelay(buf, rs.s, f, restart)
	rs.inSync, rs.source = true, f.Source
	c.sq.push(entry{buf: buf, cs: rs, t: t, queued: f.Arrived})
	if c.sq.bytes >= relayFlushBytes {
		c.Flush()
	}
	return true
}

// relayFlushBytes is how much Relay queues before it wakes the writer
// itself rather than waiting for the caller's Flush.
const relayFlushBytes = 64 << 10

// Flush has the writer send what Relay queued. A relay calls it when its
// input is drained (Drainer).
func (c *Client) Flush() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// keyRequested handles an upstream's KeyRequest: the named streams send
// their next values as keyframes, and relayed ones ask their senders for
// one (Relay). Ids the client does not know are ignored.
func (c *Client) keyRequested(payload []byte) {
	p := payloadReader{b: payload}
	n := p.uvarint("keyframe requests")
	if p.err != nil || n > uint64(len(payload)) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for range n {
		id := p.uvarint("stream id")
		if p.err != nil {
			return
		}
		// Streams are numbered from 1 in the order they were added.
		if id >= 1 && id <= uint64(len(c.enc.streams)) && c.enc.streams[id-1].id == id {
			c.enc.streams[id-1].Keyframe()
		}
	}
}
