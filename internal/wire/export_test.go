package wire

import "io"

// ClientHandshake lets external tests speak the protocol by hand (unkeyed:
// a keyed session's frames need its keys).
func ClientHandshake(rw io.ReadWriter, fr *FrameReader, key []byte, name string) (string, error) {
	name, _, err := clientHandshake(rw, fr, key, name)
	return name, err
}

// AppendFrame lets external tests build frames.
var AppendFrame = appendFrame

// QueueShape tells what a Client's queue holds: ticks, and schema frames
// kept after their ticks were dropped.
func QueueShape(c *Client) (ticks, tickBytes, kept, keptBytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.sq.q[c.sq.head:] {
		switch {
		case e.tick:
			ticks++
			tickBytes += len(e.buf)
		case !e.dead:
			kept++
			keptBytes += len(e.buf)
		}
	}
	return
}
