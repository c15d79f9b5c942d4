package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/vigil-hpc/vigil/internal/appio"
)

// frameIORecords carries per-file I/O interval records (appio.FileRecord)
// of one node: docs/format/wire.md.
const frameIORecords byte = 20

// Bounds of an IORecords frame; a receiver refuses a frame beyond them.
const (
	// MaxIORecords is the records of one frame; a sender splits a batch.
	MaxIORecords = 1024
	// maxIOFrame is the payload a sender puts in one frame (records are
	// added while it is below, so one record may overshoot it).
	maxIOFrame = 256 << 10
	// MaxIOPath bounds a record's path, executable and mount point.
	MaxIOPath = appio.MaxString
	// maxIOShort bounds a record's job id and file system type.
	maxIOShort = 256
	// maxIONode bounds the node name (as a Hello's).
	maxIONode = 255
	// MaxIOInterval bounds a record's interval (end − start).
	MaxIOInterval = int64(3600e9)
)

// IORecordHandler is implemented by a Handler that takes per-file I/O
// records (the server's record store). The decoder checks every record
// before the call; recs (with their strings) are the handler's to keep,
// payload only during the call. An error ends the connection before the
// frame is acknowledged, so the sender sends it again on its next one.
// Handlers with neither this nor IORecordRelay drop the records (after
// checking them).
type IORecordHandler interface {
	IORecords(node string, recs []appio.FileRecord, payload []byte) error
}

// AppendIORecords appends frames carrying recs of node, at most
// MaxIORecords and about 256 KiB each. Strings longer than the receiver
// accepts are cut (at a byte boundary: paths are bytes, not text).
func AppendIORecords(dst []byte, node string, recs []appio.FileRecord) []byte {
	for len(recs) > 0 {
		var n int
		dst, n = appendIOFrame(dst, node, recs)
		recs = recs[n:]
	}
	return dst
}

// appendIOFrame appends one frame with the first n records of recs (at
// least one).
func appendIOFrame(dst []byte, node string, recs []appio.FileRecord) ([]byte, int) {
	dst, start := beginFrame(dst, frameIORecords)
	dst = appendString(dst, cut(node, maxIONode))
	at := len(dst)
	dst = append(dst, 0, 0) // the count, a uvarint of at most 2 bytes
	n := 0
	for n < len(recs) && n < MaxIORecords && (n == 0 || len(dst)-start < maxIOFrame) {
		dst = appendIORecord(dst, &recs[n])
		n++
	}
	var cb [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(cb[:], uint64(n))
	if k == 1 {
		copy(dst[at+1:], dst[at+2:])
		dst = dst[:len(dst)-1]
	}
	copy(dst[at:at+k], cb[:k])
	return endFrame(dst, start), n
}

func appendIORecord(dst []byte, r *appio.FileRecord) []byte {
	dst = binary.AppendVarint(dst, r.Start)
	dst = binary.AppendUvarint(dst, uint64(max(r.End-r.Start, 0)))
	dst = appendString(dst, cut(r.JobID, maxIOShort))
	dst = binary.AppendUvarint(dst, uint64(r.PID))
	dst = binary.AppendUvarint(dst, uint64(r.UID))
	dst = binary.AppendVarint(dst, int64(r.Rank))
	dst = appendString(dst, cut(r.Exe, MaxIOPath))
	dst = appendString(dst, cut(r.Path, MaxIOPath))
	dst = appendString(dst, cut(r.MountPoint, MaxIOPath))
	dst = appendString(dst, cut(r.FSType, maxIOShort))
	for _, c := range r.Counters {
		dst = binary.AppendUvarint(dst, min(c, appio.MaxCounter))
	}
	return dst
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// DecodeIORecords parses an IORecords payload into dst (reused), each
// record's Node set to the frame's node, checking every bound: a record
// count of 1..MaxIORecords, string lengths, an interval of at most an
// hour after 1970, counters of at most 2^53, and no trailing bytes.
func DecodeIORecords(payload []byte, dst []appio.FileRecord) (string, []appio.FileRecord, error) {
	node, _, dst, err := parseIORecords(payload, dst, true)
	return node, dst, err
}

// CheckIORecords checks an IORecords payload as DecodeIORecords does,
// without keeping anything (a relay), and returns its record count.
func CheckIORecords(payload []byte) (int, error) {
	_, n, _, err := parseIORecords(payload, nil, false)
	return n, err
}

// minIORecord is the smallest encoded record: 10 one-byte fields and 36
// one-byte counters.
const minIORecord = 46

func parseIORecords(payload []byte, dst []appio.FileRecord, keep bool) (string, int, []appio.FileRecord, error) {
	p := payloadReader{b: payload}
	node := p.strMax("io records node", maxIONode)
	n := p.uvarint("io record count")
	if p.err != nil {
		return "", 0, dst, p.err
	}
	if n == 0 || n > MaxIORecords {
		return "", 0, dst, fmt.Errorf("%w: %d io records in a frame (1..%d)", ErrLimit, n, MaxIORecords)
	}
	// A forged count cannot make dst grow beyond what the payload holds.
	if n > uint64(len(p.b)/minIORecord) {
		return "", 0, dst, fmt.Errorf("%w: %d io records in %d bytes", ErrMalformed, n, len(p.b))
	}
	var nodeS string
	if keep {
		nodeS = string(node)
	}
	var c [appio.NCounters]uint64
	for range n {
		start := p.varint("io record start")
		dur := p.uvarint("io record duration")
		job := p.strMax("io record job", maxIOShort)
		pid := p.uvarint("io record pid")
		uid := p.uvarint("io record uid")
		rank := p.varint("io record rank")
		exe := p.strMax("io record executable", MaxIOPath)
		path := p.strMax("io record path", MaxIOPath)
		mount := p.strMax("io record mount", MaxIOPath)
		fstype := p.strMax("io record fstype", maxIOShort)
		for i := range c {
			c[i] = p.uvarint("io record counter")
			if c[i] > appio.MaxCounter {
				p.fail("io record counter above 2^53")
			}
		}
		if p.err != nil {
			return "", 0, dst, p.err
		}
		switch {
		case start <= 0 || dur > uint64(MaxIOInterval) || start > 1<<62:
			return "", 0, dst, fmt.Errorf("%w: io record interval %d+%d", ErrMalformed, start, dur)
		case pid > 1<<32-1 || uid > 1<<32-1 || rank < -1 || rank > 1<<31-1:
			return "", 0, dst, fmt.Errorf("%w: io record pid %d uid %d rank %d", ErrMalformed, pid, uid, rank)
		case bytes.IndexByte(path, 0) >= 0 || bytes.IndexByte(job, 0) >= 0:
			return "", 0, dst, fmt.Errorf("%w: NUL in an io record", ErrMalformed)
		}
		if keep {
			dst = append(dst, appio.FileRecord{Start: start, End: start + int64(dur), Node: nodeS, JobID: string(job),
				PID: uint32(pid), UID: uint32(uid), Rank: int32(rank), Exe: string(exe), Path: string(path),
				MountPoint: string(mount), FSType: string(fstype), Counters: c})
		}
	}
	if err := p.end("io records"); err != nil {
		return "", 0, dst, err
	}
	return nodeS, int(n), dst, nil
}

// strMax reads a string of at most max bytes.
func (p *payloadReader) strMax(what string, max int) []byte {
	n := p.uvarint(what)
	if p.err != nil {
		return nil
	}
	if n > uint64(max) {
		p.fail(fmt.Sprintf("%s: %d bytes (at most %d)", what, n, max))
		return nil
	}
	return p.bytes(int(n), what)
}

// IORecordRelay is implemented by a Handler that passes IORecords frames
// on without their records (an aggregator): the decoder only checks the
// payload, valid during the call, and gives its record count.
type IORecordRelay interface {
	RelayIORecords(payload []byte, n int) error
}

// ioRecords handles an IORecords frame.
func (d *Decoder) ioRecords(payload []byte, h Handler) error {
	if rh, ok := h.(IORecordRelay); ok {
		n, err := CheckIORecords(payload)
		if err != nil {
			return err
		}
		return rh.RelayIORecords(payload, n)
	}
	ih, ok := h.(IORecordHandler)
	if !ok {
		_, err := CheckIORecords(payload)
		return err
	}
	node, recs, err := DecodeIORecords(payload, nil)
	if err != nil {
		return err
	}
	return ih.IORecords(node, recs, payload)
}

// IORecords queues per-file I/O records of node for the upstream, in
// frames of at most MaxIORecords. They are kept until the upstream
// acknowledges them and sent again on the next connection; beyond the
// record bound (a quarter of MaxQueueBytes) the oldest record frames are
// dropped and counted in DroppedIORecords. It does not block.
func (c *Client) IORecords(node string, recs []appio.FileRecord) {
	if len(recs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(recs) > 0 {
		buf, n := appendIOFrame(c.take(), node, recs)
		c.pushRecords(buf, n)
		recs = recs[n:]
	}
}

// RelayIORecords queues an IORecords payload a child sent, as it is.
func (c *Client) RelayIORecords(payload []byte, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pushRecords(appendFrame(c.take(), frameIORecords, payload), n)
}

// pushRecords queues a frame holding n records, first dropping the oldest
// record frames while the records would pass their bound (the new frame
// itself if it alone is too big).
func (c *Client) pushRecords(buf []byte, n int) {
	c.stats.IORecords.Add(uint64(n))
	for c.sq.recBytes+len(buf) > c.sq.max/4 && c.sq.dropOldestRecords() {
	}
	if c.sq.recBytes+len(buf) > c.sq.max/4 {
		c.stats.DroppedIORecords.Add(uint64(n))
		c.sq.release(buf)
		return
	}
	c.sq.recBytes += len(buf)
	c.push(entry{buf: buf, rec: true, nrec: n}, nil)
}
