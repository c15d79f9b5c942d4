package relp

import (
	"encoding/binary"
	"hash/maphash"
	"sync"

	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// Dedup remembers the keys of the last messages stored over RELP, so that
// messages a sender resends because their acknowledgement was lost (the
// server died or the connection broke after the store had them) are
// acknowledged again but not stored twice.
//
// Only the start of a session is checked: a sender resends its
// unacknowledged messages first and in order, and the stored ones among
// them come before the others, so the duplicates are a prefix of the new
// session. The first message that is not a duplicate ends the check, and
// a message repeated later on, identical in time, host and text, is kept.
// Keys are hashes seeded per process: they are rebuilt from the store at
// start-up, never saved.
type Dedup struct {
	seed maphash.Seed

	mu     sync.Mutex
	counts map[uint64]int32
	ring   []uint64 // keys in storage order, oldest evicted first
	next   int
	full   bool
}

// NewDedup remembers up to n keys.
func NewDedup(n int) *Dedup {
	return &Dedup{seed: maphash.MakeSeed(), counts: make(map[uint64]int32, n), ring: make([]uint64, max(n, 1))}
}

// Key identifies a message by what a resend repeats: its time, origin and
// content, not the time it arrived.
func (d *Dedup) Key(m *syslog.Message) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	var b [10]byte
	binary.LittleEndian.PutUint64(b[:], uint64(m.Time.UnixNano()))
	b[8], b[9] = m.Facility, m.Severity
	h.Write(b[:])
	for _, s := range [...]string{m.Host, m.App, m.ProcID, m.MsgID, m.SD, m.Text} {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		h.Write(b[:8])
		h.WriteString(s)
	}
	return h.Sum64()
}

// Add records a stored message.
func (d *Dedup) Add(k uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full {
		old := d.ring[d.next]
		if c := d.counts[old]; c <= 1 {
			delete(d.counts, old)
		} else {
			d.counts[old] = c - 1
		}
	}
	d.ring[d.next] = k
	d.counts[k]++
	if d.next++; d.next == len(d.ring) {
		d.next, d.full = 0, true
	}
}

// Count is how many stored messages have key k. A session counts its
// own matches against it: a resent message matches once per session (its
// acknowledgement may be lost more than once), and two identical messages
// of which one was stored do not both match.
func (d *Dedup) Count(k uint64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int(d.counts[k])
}
