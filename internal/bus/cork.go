package bus

import (
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// corkMax is what a corked connection holds before it writes anyway.
const corkMax = 256 << 10

// corkConn gathers the writes made while it is corked and writes them
// to the socket in one go when uncorked. The AMQP client flushes its
// buffer after every message, one write system call each (and one wake-up
// of the broker's reader); the publisher corks the connection around a
// batch of messages so the batch costs one write. Writes while not corked
// (heartbeats, the handshake, other channels' calls) go straight through.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
	err    error // a failed write: reported to every later one
	writes prometheus.Counter
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if !c.corked {
		c.writes.Inc()
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= corkMax {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// cork starts gathering writes.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was gathered and lets later writes through. Its
// error is the connection's: the session ends on it.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if c.err != nil {
		return c.err
	}
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	c.writes.Inc()
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > corkMax*2 {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	if err != nil {
		c.err = err
		c.Conn.Close() // the client library learns of it from its reader
	}
	return err
}
