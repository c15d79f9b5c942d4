// Package appio is the application I/O protocol (docs/format/appio.md):
// the messages libvigilio and `vigil iofs` send the node's sampler over a
// SOCK_SEQPACKET Unix socket, one per connection and process. It has the
// constants both sides share, an encoder (for `vigil iofs` and tests) and
// a bounded decoder that never trusts a length it has not checked.
package appio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

const (
	// DefaultSocket is where the sampler listens and clients connect
	// unless EnvSocket says otherwise.
	DefaultSocket = "/run/vigil/appio.sock"
	// EnvSocket names the environment variable that overrides
	// DefaultSocket for clients.
	EnvSocket = "VIGIL_APPIO_SOCKET"

	// Magic opens every message.
	Magic = "VIO1"
	// Version is the protocol version in every header.
	Version = 1
	// HeaderSize is the length of a message header.
	HeaderSize = 12
	// MaxMessage bounds one message, header included.
	MaxMessage = 65536
	// MaxString bounds the strings of HELLO and FILE.
	MaxString = 4096

	// NCounters is the number of counters in an interval record.
	NCounters = 36
	// RecordSize is the encoded size of one interval record.
	RecordSize = 8 + 8*NCounters
	// intervalHead is start, end and the record count.
	intervalHead = 8 + 8 + 4
	// MaxRecords is how many records fit in one INTERVAL message.
	MaxRecords = (MaxMessage - HeaderSize - intervalHead) / RecordSize

	// MaxCounter bounds one counter of one record: more than 2^53 of
	// anything in one interval is nonsense, and above it float64 sums
	// lose integers.
	MaxCounter = 1 << 53
)

// Type is a message type.
type Type uint16

// Message types.
const (
	TypeHello    Type = 1
	TypeFile     Type = 2
	TypeInterval Type = 3
	TypeBye      Type = 4
)

// FlagIOFS in a FILE says the file is reported by `vigil iofs`: its
// records name the calling process in their pid.
const FlagIOFS = 1

// Counter indexes of a record, in wire order.
const (
	Opens = iota
	Closes
	Reads
	Writes
	BytesRead
	BytesWritten
	ReadNS
	WriteNS
	MetaNS
	Seeks
	Syncs
	Stats
	Mmaps
	MetaOther
	SeqAccesses
	RandomAccesses
	ReadHist  // first of NBuckets read size buckets
	WriteHist = ReadHist + NBuckets
)

// NBuckets is the number of access-size buckets per direction.
const NBuckets = 10

// CounterNames are the counters' names, by index.
var CounterNames = [NCounters]string{
	"opens", "closes", "reads", "writes", "bytes_read", "bytes_written",
	"read_ns", "write_ns", "meta_ns", "seeks", "syncs", "stats", "mmaps",
	"meta_other", "seq_accesses", "random_accesses",
	"read_size_0_100", "read_size_100_1K", "read_size_1K_10K", "read_size_10K_100K", "read_size_100K_1M",
	"read_size_1M_4M", "read_size_4M_10M", "read_size_10M_100M", "read_size_100M_1G", "read_size_1G_plus",
	"write_size_0_100", "write_size_100_1K", "write_size_1K_10K", "write_size_10K_100K", "write_size_100K_1M",
	"write_size_1M_4M", "write_size_4M_10M", "write_size_10M_100M", "write_size_100M_1G", "write_size_1G_plus",
}

// BucketBounds are the upper bounds in bytes of the first NBuckets-1
// access-size buckets, as Darshan's POSIX_SIZE_* counters (K = 1024); the
// last bucket has none.
var BucketBounds = [NBuckets - 1]uint64{100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30}

// BucketLabels are the bounds as `le` label values, "+Inf" last.
var BucketLabels = func() [NBuckets]string {
	var l [NBuckets]string
	for i, b := range BucketBounds {
		l[i] = strconv.FormatUint(b, 10)
	}
	l[NBuckets-1] = "+Inf"
	return l
}()

// Hello is the first message of a connection.
type Hello struct {
	Rank       int32 // -1: unknown
	IntervalMS uint32
	Exe        string
	JobID      string // SLURM_JOB_ID from the environment, may be empty
	Client     string
}

// File announces a file before its first record.
type File struct {
	ID    uint32 // ≥ 1
	Flags uint32
	PID   uint32 // 0: the connection's process
	Path  string
}

// Record is one file's (and process's) deltas over an interval.
type Record struct {
	FileID uint32 // 0: the library's "other files"
	PID    uint32 // 0: the connection's process
	C      [NCounters]uint64
}

// Zero reports whether every counter is zero.
func (r *Record) Zero() bool { return r.C == [NCounters]uint64{} }

// Interval is one INTERVAL message.
type Interval struct {
	Start, End uint64 // Unix nanoseconds
	Records    []Record
}

// Errors of the decoder. A connection that sends ErrHeader is closed;
// the others name a bad message.
var (
	ErrHeader  = errors.New("appio: bad header")
	ErrMessage = errors.New("appio: bad message")
)

// ParseHeader checks a whole message's header and returns its type and
// payload. An unknown type is not an error (the caller skips it).
func ParseHeader(msg []byte) (Type, []byte, error) {
	if len(msg) < HeaderSize {
		return 0, nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrHeader, len(msg), HeaderSize)
	}
	if len(msg) > MaxMessage {
		return 0, nil, fmt.Errorf("%w: %d bytes, more than %d", ErrHeader, len(msg), MaxMessage)
	}
	if string(msg[:4]) != Magic {
		return 0, nil, fmt.Errorf("%w: magic %q, want %q", ErrHeader, msg[:4], Magic)
	}
	if v := binary.LittleEndian.Uint16(msg[4:]); v != Version {
		return 0, nil, fmt.Errorf("%w: version %d, want %d", ErrHeader, v, Version)
	}
	t := Type(binary.LittleEndian.Uint16(msg[6:]))
	if n := binary.LittleEndian.Uint32(msg[8:]); int64(n) != int64(len(msg)-HeaderSize) {
		return 0, nil, fmt.Errorf("%w: payload length %d, message has %d", ErrHeader, n, len(msg)-HeaderSize)
	}
	return t, msg[HeaderSize:], nil
}

// reader takes fields off a payload; the first short read sticks.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || len(r.b) < n {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

// str reads a u16-length-prefixed string of at most MaxString bytes.
func (r *reader) str() []byte {
	l := r.take(2)
	if l == nil {
		return nil
	}
	n := int(binary.LittleEndian.Uint16(l))
	if n > MaxString {
		r.bad = true
		return nil
	}
	return r.take(n)
}

func (r *reader) done(what string) error {
	if r.bad {
		return fmt.Errorf("%w: %s payload too short or a string over %d bytes", ErrMessage, what, MaxString)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the %s payload", ErrMessage, len(r.b), what)
	}
	return nil
}

// DecodeHello decodes a HELLO payload.
func DecodeHello(p []byte) (Hello, error) {
	r := reader{b: p}
	var h Hello
	h.Rank = int32(r.u32())
	h.IntervalMS = r.u32()
	exe, job, client := r.str(), r.str(), r.str()
	if err := r.done("HELLO"); err != nil {
		return Hello{}, err
	}
	if h.Rank < -1 {
		return Hello{}, fmt.Errorf("%w: HELLO rank %d", ErrMessage, h.Rank)
	}
	h.Exe, h.JobID, h.Client = string(exe), string(job), string(client)
	return h, nil
}

// DecodeFile decodes a FILE payload; the path must be absolute and have
// no NUL byte.
func DecodeFile(p []byte) (File, error) {
	r := reader{b: p}
	var f File
	f.ID, f.Flags, f.PID = r.u32(), r.u32(), r.u32()
	path := r.str()
	if err := r.done("FILE"); err != nil {
		return File{}, err
	}
	if f.ID == 0 {
		return File{}, fmt.Errorf("%w: FILE id 0 is reserved", ErrMessage)
	}
	if len(path) == 0 || path[0] != '/' {
		return File{}, fmt.Errorf("%w: FILE %d path %q is not absolute", ErrMessage, f.ID, path)
	}
	for _, c := range path {
		if c == 0 {
			return File{}, fmt.Errorf("%w: FILE %d path has a NUL byte", ErrMessage, f.ID)
		}
	}
	f.Path = string(path)
	return f, nil
}

// DecodeInterval decodes an INTERVAL payload, appending its records to
// dst[:0] (reused: a steady-state decode allocates nothing).
func DecodeInterval(p []byte, dst []Record) (Interval, error) {
	if len(p) < intervalHead {
		return Interval{}, fmt.Errorf("%w: INTERVAL payload of %d bytes", ErrMessage, len(p))
	}
	iv := Interval{Start: binary.LittleEndian.Uint64(p), End: binary.LittleEndian.Uint64(p[8:])}
	n := binary.LittleEndian.Uint32(p[16:])
	p = p[intervalHead:]
	if uint64(n)*RecordSize != uint64(len(p)) {
		return Interval{}, fmt.Errorf("%w: INTERVAL of %d records has %d bytes of records, want %d", ErrMessage, n, len(p), uint64(n)*RecordSize)
	}
	if iv.End < iv.Start {
		return Interval{}, fmt.Errorf("%w: INTERVAL ends (%d) before it starts (%d)", ErrMessage, iv.End, iv.Start)
	}
	recs := dst[:0]
	for i := 0; i < int(n); i++ {
		b := p[i*RecordSize : (i+1)*RecordSize]
		var rec Record
		rec.FileID = binary.LittleEndian.Uint32(b)
		rec.PID = binary.LittleEndian.Uint32(b[4:])
		for k := range rec.C {
			v := binary.LittleEndian.Uint64(b[8+8*k:])
			if v > MaxCounter {
				return Interval{}, fmt.Errorf("%w: INTERVAL record %d counter %s = %d, more than 2^53", ErrMessage, i, CounterNames[k], v)
			}
			rec.C[k] = v
		}
		recs = append(recs, rec)
	}
	iv.Records = recs
	return iv, nil
}

// Message is any decoded message, for tests and tools.
type Message struct {
	Type     Type
	Hello    Hello
	File     File
	Interval Interval
}

// Decode decodes one whole message; an unknown type comes back with only
// its Type set.
func Decode(msg []byte) (Message, error) {
	t, p, err := ParseHeader(msg)
	if err != nil {
		return Message{}, err
	}
	m := Message{Type: t}
	switch t {
	case TypeHello:
		m.Hello, err = DecodeHello(p)
	case TypeFile:
		m.File, err = DecodeFile(p)
	case TypeInterval:
		m.Interval, err = DecodeInterval(p, nil)
	case TypeBye:
		if len(p) != 0 {
			err = fmt.Errorf("%w: BYE with %d bytes of payload", ErrMessage, len(p))
		}
	}
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

// appendHeader appends a header whose length is patched by finish.
func appendHeader(dst []byte, t Type) []byte {
	dst = append(dst, Magic...)
	dst = binary.LittleEndian.AppendUint16(dst, Version)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(t))
	return append(dst, 0, 0, 0, 0)
}

func finish(dst []byte, start int) []byte {
	binary.LittleEndian.PutUint32(dst[start+8:], uint32(len(dst)-start-HeaderSize))
	return dst
}

func appendStr(dst []byte, s string) []byte {
	if len(s) > MaxString {
		s = s[:MaxString]
	}
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// AppendHello appends a HELLO message; strings are cut at MaxString.
func AppendHello(dst []byte, h Hello) []byte {
	start := len(dst)
	dst = appendHeader(dst, TypeHello)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(h.Rank))
	dst = binary.LittleEndian.AppendUint32(dst, h.IntervalMS)
	dst = appendStr(dst, h.Exe)
	dst = appendStr(dst, h.JobID)
	dst = appendStr(dst, h.Client)
	return finish(dst, start)
}

// AppendFile appends a FILE message; the path is cut at MaxString.
func AppendFile(dst []byte, f File) []byte {
	start := len(dst)
	dst = appendHeader(dst, TypeFile)
	dst = binary.LittleEndian.AppendUint32(dst, f.ID)
	dst = binary.LittleEndian.AppendUint32(dst, f.Flags)
	dst = binary.LittleEndian.AppendUint32(dst, f.PID)
	dst = appendStr(dst, f.Path)
	return finish(dst, start)
}

// AppendInterval appends one INTERVAL message holding recs, which must
// be at most MaxRecords (SplitInterval cuts longer lists).
func AppendInterval(dst []byte, start, end uint64, recs []Record) []byte {
	at := len(dst)
	dst = appendHeader(dst, TypeInterval)
	dst = binary.LittleEndian.AppendUint64(dst, start)
	dst = binary.LittleEndian.AppendUint64(dst, end)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(recs)))
	for i := range recs {
		r := &recs[i]
		dst = binary.LittleEndian.AppendUint32(dst, r.FileID)
		dst = binary.LittleEndian.AppendUint32(dst, r.PID)
		for _, c := range r.C {
			dst = binary.LittleEndian.AppendUint64(dst, c)
		}
	}
	return finish(dst, at)
}

// SplitInterval encodes an interval's records, all-zero ones left out,
// as INTERVAL messages of at most MaxMessage bytes with the same start
// and end; none when no record is left.
func SplitInterval(start, end uint64, recs []Record) [][]byte {
	var msgs [][]byte
	var batch []Record
	flush := func() {
		if len(batch) > 0 {
			msgs = append(msgs, AppendInterval(nil, start, end, batch))
			batch = batch[:0]
		}
	}
	for i := range recs {
		if recs[i].Zero() {
			continue
		}
		batch = append(batch, recs[i])
		if len(batch) == MaxRecords {
			flush()
		}
	}
	flush()
	return msgs
}

// AppendBye appends a BYE message.
func AppendBye(dst []byte) []byte {
	return finish(appendHeader(dst, TypeBye), len(dst))
}

// SmallBuckets is how many leading access-size buckets hold only accesses
// of at most max bytes (2 for 1 KiB: "≤ 100" and "≤ 1 KiB"). Notes on small
// reads or writes count those buckets of the read or write histogram.
func SmallBuckets(max uint64) int {
	n := 0
	for n < len(BucketBounds) && BucketBounds[n] <= max {
		n++
	}
	return n
}

// SmallAccesses sums the buckets of hist (a read or write size histogram,
// per bucket, not cumulative) that hold accesses of at most max bytes.
func SmallAccesses(hist *[NBuckets]uint64, max uint64) uint64 {
	var s uint64
	for _, v := range hist[:SmallBuckets(max)] {
		s += v
	}
	return s
}
