package wire

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net"
	"time"
)

// RelayHandler is a Handler that passes a sender's frames on as they were
// coded (an aggregator, with Client.RelaySchema and Client.Relay): the
// Decoder calls RelaySchema instead of Schema and RelayTick instead of
// Tick. It only checks values frames, keeping per series the code mode
// and XOR window (one byte) rather than the value state (24 bytes), so
// values are never computed; a malformed frame is refused as the full
// decoder would refuse it.
type RelayHandler interface {
	Handler
	RelaySchema(node string, s *RelaySchema)
	RelayTick(node string, t time.Time, f *RelayFrame)
}

// A Drainer handler is told when its connection's input is drained: the
// frames read so far are handled and the next read waits for the peer.
// A relay flushes then (Client.Flush), so what it relayed from one read
// goes out together instead of waking its writer for every frame.
type Drainer interface {
	Drained()
}

// RelaySource is one sending stream as a relay sees it: frames of one
// source continue each other, frames of different ones do not. It holds
// nothing of the decoder's tables, so a relay may keep it.
type RelaySource struct {
	// Fwd is the handler's own state for the stream (where it goes).
	Fwd any
}

// RelaySchema is a schema frame as its sender coded it: the relay's
// receiver gets the same table if it is sent the same flags, the same
// added entries and the same order. Slices are valid only during the call.
type RelaySchema struct {
	Source         *RelaySource
	Reset, Compact bool
	// Table is the stream's descriptor table after the frame, of which
	// the last Added entries are new; Runs is the order of the following
	// ticks as (start, length) pairs of Table indexes.
	Table Table
	Added int
	Runs  []int32
}

// RelayFrame is a values frame as its sender coded it. Slices are valid
// only during the call.
type RelayFrame struct {
	Source *RelaySource
	// Key: the values decode from the initial state (a keyframe, or the
	// first values after a reset schema).
	Key bool
	// Body is the payload after the stream id.
	Body []byte
	// N is the number of values.
	N int
	// Table and Runs are the stream's, for a relay that starts over.
	Table Table
	Runs  []int32
	// WantKey is set by the handler to ask the sender for a keyframe of
	// the stream (sent once until one comes).
	WantKey bool
	// Arrived is when the frame was read, to within a few dozen frames'
	// handling (a clock read per frame is a tenth of a relay's work);
	// zero if the caller of Decode did not say.
	Arrived time.Time
}

// maxKeyReqBatch is how many keyframe requests wait while more frames are
// buffered; otherwise they go out when the input drains.
const maxKeyReqBatch = 64

// sendKeyRequests writes a KeyRequest frame naming the streams whose
// keyframe a handler asked for, when the input has drained or enough are
// waiting. Senders that do not know the frame ignore it.
func (d *Decoder) sendKeyRequests(conn net.Conn, send *frameMAC, hb *holdBeat, drained bool) error {
	if len(d.keyReq) == 0 || !drained && len(d.keyReq) < maxKeyReqBatch {
		return nil
	}
	p := binary.AppendUvarint(nil, uint64(len(d.keyReq)))
	for _, id := range d.keyReq {
		p = binary.AppendUvarint(p, id)
	}
	d.keyReq = d.keyReq[:0]
	if hb != nil {
		hb.mu.Lock() // the heartbeat seals too: one tag sequence
		defer hb.mu.Unlock()
	}
	_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(send.seal(nil, appendFrame(nil, frameKeyReq, p))); err != nil {
		return fmt.Errorf("write keyframe request: %w", err)
	}
	return nil
}

// AppendRelaySchema appends the schema frame sc for s, which relays sc's
// source in step: the peer's table of s stays the sender's.
func (e *Encoder) AppendRelaySchema(dst []byte, s *Stream, sc *RelaySchema) []byte {
	return e.relaySchema(dst, s, sc.Table, sc.Table.Len()-sc.Added, sc.Runs, sc.Reset, sc.Compact)
}

// relaySchema makes s's table table, of which the peer already holds the
// first kept entries (after a compaction when flagged), and appends the
// frame that says so. s shares table with the Decoder, which never
// changes the first table.Len() entries of it (it changes a copy), so
// other streams' schemas may copy from it later.
func (e *Encoder) relaySchema(dst []byte, s *Stream, table Table, kept int, runs []int32, reset, compact bool) []byte {
	if reset {
		s.epoch = e.epoch
		kept = 0
	}
	if reset || compact {
		e.dropKnown(s)
	}
	e.entries += table.Len() - s.descs.Len()
	s.descs = table.frozen()
	if compact && !reset {
		e.addKnown(s, kept)
	}
	e.newd = e.newd[:0]
	for i := kept; i < table.Len(); i++ {
		e.newd = append(e.newd, int32(i))
	}
	dst = e.writeSchema(dst, s, reset, compact, runs)
	// No order or value state of its own: the next schema brings the
	// order, the values go as they came.
	s.idx, s.state, s.seq = nil, nil, nil
	return dst
}

// AppendRelay appends the values frame f another sender coded, as it is
// but for the stream id. With restart, a reset schema with the sender's
// whole table and order comes first, so the peer's table is the sender's
// and its value state the initial one; f must then decode from the
// initial state (f.Key). Otherwise the peer must hold the state f was
// coded against: s relayed f's source in step since such a restart.
func (e *Encoder) AppendRelay(dst []byte, s *Stream, f *RelayFrame, restart bool) []byte {
	if restart {
		dst = e.relaySchema(dst, s, f.Table, 0, f.Runs, true, false)
	}
	s.valuesAt = len(dst)
	s.key = f.Key
	typ := frameValues
	if f.Key {
		typ |= frameKey
		s.forceKey = false // a keyframe asked for by the peer has come
	}
	dst, start := beginFrame(dst, typ)
	dst = binary.AppendUvarint(dst, s.id)
	dst = append(dst, f.Body...)
	return endFrame(dst, start)
}

// chkState is what the checker keeps of a series: 0 in scaled mode, else
// the width (1..64) of the XOR window of its last float code, which a
// float code reusing the window reads.
type chkState uint8

// appendRuns appends an order given as (start, length) pairs of table
// indexes: the series count, then each run as in a schema frame.
func appendRuns(dst []byte, runs []int32) []byte {
	n := 0
	for r := 1; r < len(runs); r += 2 {
		n += int(runs[r])
	}
	dst = binary.AppendUvarint(dst, uint64(n))
	next := int32(0)
	for r := 0; r+1 < len(runs); r += 2 {
		dst = binary.AppendUvarint(dst, zigzag(int64(runs[r]-next)))
		dst = binary.AppendUvarint(dst, uint64(runs[r+1]))
		next = runs[r] + runs[r+1]
	}
	return dst
}

// expandRuns appends the table indexes of runs to dst.
func expandRuns(dst []int32, runs []int32) []int32 {
	for r := 0; r+1 < len(runs); r += 2 {
		for i := runs[r]; i < runs[r]+runs[r+1]; i++ {
			dst = append(dst, i)
		}
	}
	return dst
}

// checkCodes walks the value codes of body, one per table entry of the
// order runs, with the states of the entries, as decodeValue would read
// them: it reports false where decodeValue would fail (a code running
// past the end, a residual or a window reuse without a previous value of
// that kind, a scale above maxScale, a window past 64 bits) or when bytes
// remain after the last code.
//
// It is a third of a relaying aggregator's work, so it keeps the next bits
// in a word (w, of which avail are the body's) and shifts codes out of it,
// loading again only when fewer than the longest code head (19 bits) are
// left: a code's length then depends on no memory load.
func checkCodes(body []byte, runs []int32, st []chkState) bool {
	end := uint(len(body)) * 8
	pos := uint(0)
	w, avail := peek64(body, 0), uint(57)
	// bad collects the states of residual codes, which need scaled mode
	// (0): checked once at the end instead of a branch per code.
	var bad chkState
	for r := 0; r+1 < len(runs); r += 2 {
		stop := runs[r] + runs[r+1]
		for i := runs[r]; i < stop; i++ {
			if pos >= end {
				return false // every code has at least one bit
			}
			if avail < 19 {
				w, avail = peek64(body, pos), 57
			}
			ones := uint(bits.LeadingZeros64(^w))
			var n uint // the code's length
			switch {
			case ones == 0:
				// An exact prediction: one 0 bit, no state. They come
				// in runs (70 % of the simulated nodes' codes), so take
				// as many as the word shows, the order's run holds and
				// the body has bits for.
				z := min(uint(bits.LeadingZeros64(w)), avail, uint(stop-i), end-pos)
				pos += z
				w <<= z
				avail -= z
				i += int32(z) - 1
				continue
			case ones <= 4:
				// A residual of 7, 14 or 24 bits, or (four ones) of a
				// 6-bit length + 1.
				bad |= st[i]
				n = uint(residualLens>>(ones*8)&0xff) + uint(w>>(64-11)&63)*(ones>>2)
			case ones == 5:
				if w>>(64-10)&15 > maxScale {
					return false
				}
				n = 6 + 4 + 6 + uint(w>>(64-16)&63) + 1
				st[i] = 0
			default: // six ones: a float code
				if w>>(64-7)&1 == 0 {
					if st[i] == 0 {
						return false
					}
					n = 7 + uint(st[i])
					break
				}
				lead, k := w>>(64-13)&63, w>>(64-19)&63+1
				if lead+k > 64 {
					return false
				}
				n = 19 + uint(k)
				st[i] = chkState(k)
			}
			pos += n
			if pos > end {
				return false
			}
			if n < avail {
				w <<= n
				avail -= n
			} else {
				avail = 0
			}
		}
	}
	return bad == 0 && (pos+7)/8 == uint(len(body))
}

// residualLens holds, in byte k, the length of a residual code of k
// leading ones but for the 6-bit length field of the four-ones code: a
// shift, where a table would put a load in every code's path.
const residualLens = (1+1+7)<<8 | (2+1+14)<<16 | (3+1+24)<<24 | (4+1+6+1)<<32

// peek64 returns the 64 bits of b from bit pos on, zeros past the end.
// At least the first 57 are b's (pos&7 ≤ 7 bits of a ninth byte are left
// out), more than any prefix and length fields of one code need.
func peek64(b []byte, pos uint) uint64 {
	i := pos >> 3
	var w uint64
	if i+8 <= uint(len(b)) {
		w = binary.BigEndian.Uint64(b[i:])
	} else {
		for k := i; k < i+8; k++ {
			w <<= 8
			if k < uint(len(b)) {
				w |= uint64(b[k])
			}
		}
	}
	return w << (pos & 7)
}
