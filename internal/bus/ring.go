package bus

import (
	"sync"
)

// ring is the metrics memory buffer: a bounded FIFO that drops its oldest
// message when full (by count or by bytes). The ingest goroutines push;
// the one publishing goroutine takes many at a time, so a busy second
// costs a lock and a wake-up per batch rather than a channel handoff per
// message.
type ring struct {
	mu       sync.Mutex
	buf      []outMsg // len(buf) is the capacity in messages
	head, n  int
	bytes    int64 // of the bodies held
	maxBytes int64
	// wake has room for one signal: a push into an empty ring sends it,
	// so the publisher is woken once however many follow.
	wake chan struct{}
}

func newRing(capacity int, maxBytes int64) *ring {
	return &ring{buf: make([]outMsg, max(capacity, 1)), maxBytes: maxBytes, wake: make(chan struct{}, 1)}
}

// push adds m, first dropping the oldest messages while the ring is full;
// it returns how many it dropped (their bodies are recycled) and whether m
// itself was dropped (a body larger than the whole byte bound).
func (r *ring) push(m outMsg) (dropped int, rejected bool) {
	size := int64(len(m.body))
	r.mu.Lock()
	if size > r.maxBytes {
		r.mu.Unlock()
		return 0, true
	}
	for r.n == len(r.buf) || r.bytes+size > r.maxBytes {
		old := &r.buf[r.head]
		r.bytes -= int64(len(old.body))
		putBody(old)
		*old = outMsg{}
		r.head = (r.head + 1) % len(r.buf)
		r.n--
		dropped++
	}
	r.buf[(r.head+r.n)%len(r.buf)] = m
	r.n++
	r.bytes += size
	first := r.n == 1
	r.mu.Unlock()
	if first {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	return dropped, false
}

// take moves up to max messages, oldest first, and at most about maxBytes
// of bodies (at least one message), to dst.
func (r *ring) take(dst []outMsg, max int, maxBytes int) []outMsg {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := 0
	for i := 0; i < max && r.n > 0 && (i == 0 || size < maxBytes); i++ {
		m := &r.buf[r.head]
		dst = append(dst, *m)
		size += len(m.body)
		r.bytes -= int64(len(m.body))
		*m = outMsg{}
		r.head = (r.head + 1) % len(r.buf)
		r.n--
	}
	return dst
}

func (r *ring) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Metrics bodies are recycled once published (the client library has
// copied them into its socket buffer by then) or dropped: at 20,000 a
// second their garbage was most of what the bus cost a storing server.
// The pool holds *[]byte so that putting one back allocates nothing.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBody keeps the rare huge body (a schema of thousands of long
// series) out of the pool.
const maxPooledBody = 64 << 10

func getBody() *[]byte { return bodyPool.Get().(*[]byte) }

// putBody recycles m's body if it came from the pool; m.body must not be
// used after.
func putBody(m *outMsg) {
	if m.pooled == nil || cap(m.body) > maxPooledBody {
		return
	}
	*m.pooled = m.body[:0]
	bodyPool.Put(m.pooled)
	m.pooled, m.body = nil, nil
}
