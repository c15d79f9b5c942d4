// Package logstore is the embedded log store: an append-only log of
// records split into segment files, which is also the write-ahead log (a
// record is durable once Append returns: every batch is fsynced), with time
// and size retention, and a filtered newest-first search.
//
// On disk, DIR/NNNNNNNNNNNNNNNNNNNN.seg holds records whose sequence numbers
// start at NNN; each record is
//
//	+------------+--------------+------------------------------------+
//	| len uint32 | crc32c(data) | data: len bytes                    |
//	|   (LE)     |   uint32 LE  |                                    |
//	+------------+--------------+------------------------------------+
//
// and data is uvarint seq, varint time and received time (Unix ns), bytes
// facility, severity, flags, uvarint pattern id, then host, app, procid,
// msgid, structured data and text, each as uvarint length and bytes. A torn
// record at the end of the last segment (a crash mid-write, before the
// fsync that would have acknowledged it) is cut off at Open.
package logstore

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// Flags of a record.
const (
	FlagMalformed uint8 = 1 << iota
	FlagTruncated
	FlagRELP // received over RELP (acknowledged after the store had it)
)

// Record is one stored message.
type Record struct {
	Seq      uint64 // assigned by Append, increasing
	Time     time.Time
	Received time.Time
	Host     string
	App      string
	ProcID   string
	MsgID    string
	SD       string
	Text     string
	Facility uint8
	Severity uint8
	Flags    uint8
	Pattern  uint64
}

const headerSize = 8

// maxRecord bounds one record's data; longer ones are corrupt.
const maxRecord = 4 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errCorrupt = errors.New("corrupt record")

// appendRecord encodes r after dst.
func appendRecord(dst []byte, r *Record) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst = binary.AppendUvarint(dst, r.Seq)
	dst = binary.AppendVarint(dst, r.Time.UnixNano())
	dst = binary.AppendVarint(dst, r.Received.UnixNano())
	dst = append(dst, r.Facility, r.Severity, r.Flags)
	dst = binary.AppendUvarint(dst, r.Pattern)
	for _, s := range [...]string{r.Host, r.App, r.ProcID, r.MsgID, r.SD, r.Text} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	data := dst[start+headerSize:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(data)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(data, castagnoli))
	return dst
}

// view is a decoded record whose byte fields point into the read buffer,
// so that filtering does not allocate.
type view struct {
	seq            uint64
	time, recv     int64
	fac, sev, flag uint8
	pattern        uint64
	host, app      []byte
	procID, msgID  []byte
	sd, text       []byte
}

// nextRecord decodes the record at the start of b and returns its total
// size. n is 0 with a nil error when b holds only part of a record.
func nextRecord(b []byte, v *view) (n int, err error) {
	if len(b) < headerSize {
		return 0, nil
	}
	size := int(binary.LittleEndian.Uint32(b))
	if size > maxRecord || size < 8 {
		return 0, errCorrupt
	}
	if len(b) < headerSize+size {
		return 0, nil
	}
	data := b[headerSize : headerSize+size]
	if crc32.Checksum(data, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, errCorrupt
	}
	if err := decode(data, v); err != nil {
		return 0, err
	}
	return headerSize + size, nil
}

func decode(d []byte, v *view) error {
	var k int
	if v.seq, k = binary.Uvarint(d); k <= 0 {
		return errCorrupt
	}
	d = d[k:]
	if v.time, k = binary.Varint(d); k <= 0 {
		return errCorrupt
	}
	d = d[k:]
	if v.recv, k = binary.Varint(d); k <= 0 {
		return errCorrupt
	}
	d = d[k:]
	if len(d) < 3 {
		return errCorrupt
	}
	v.fac, v.sev, v.flag = d[0], d[1], d[2]
	d = d[3:]
	if v.pattern, k = binary.Uvarint(d); k <= 0 {
		return errCorrupt
	}
	d = d[k:]
	for _, f := range [...]*[]byte{&v.host, &v.app, &v.procID, &v.msgID, &v.sd, &v.text} {
		l, k := binary.Uvarint(d)
		if k <= 0 || l > uint64(len(d)-k) {
			return errCorrupt
		}
		*f = d[k : k+int(l)]
		d = d[k+int(l):]
	}
	return nil
}

func (v *view) record() Record {
	return Record{
		Seq:      v.seq,
		Time:     time.Unix(0, v.time),
		Received: time.Unix(0, v.recv),
		Host:     string(v.host),
		App:      string(v.app),
		ProcID:   string(v.procID),
		MsgID:    string(v.msgID),
		SD:       string(v.sd),
		Text:     string(v.text),
		Facility: v.fac,
		Severity: v.sev,
		Flags:    v.flag,
		Pattern:  v.pattern,
	}
}
