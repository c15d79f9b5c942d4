package iofs

// The sender of the appio protocol (docs/format/appio.md): HELLO, FILE,
// INTERVAL and BYE over a SOCK_SEQPACKET Unix socket, encoded by package
// appio as the sampler decodes them.

import (
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/appio"
	"github.com/vigil-hpc/vigil/internal/logging"
)

// Protocol constants of the appio contract (package appio).
const (
	maxRecords = appio.MaxRecords
	flagIofs   = appio.FlagIOFS // FILE flag: counts are per calling pid
)

// AppendHello appends a HELLO message.
func AppendHello(dst []byte, rank int32, interval time.Duration, exe, jobID, client string) []byte {
	return appio.AppendHello(dst, appio.Hello{Rank: rank, IntervalMS: uint32(interval / time.Millisecond),
		Exe: clip(exe), JobID: clip(jobID), Client: clip(client)})
}

func clip(s string) string {
	if len(s) > appio.MaxString {
		return s[:appio.MaxString]
	}
	return s
}

// AppendFile appends a FILE message; a longer path is cut to 4096 bytes.
func AppendFile(dst []byte, id, flags, pid uint32, path string) []byte {
	return appio.AppendFile(dst, appio.File{ID: id, Flags: flags, PID: pid, Path: clip(path)})
}

// WireRecord is one INTERVAL record.
type WireRecord struct {
	ID  uint32
	Pid uint32
	C   *Counters
}

// AppendInterval appends an INTERVAL message of at most maxRecords records.
func AppendInterval(dst []byte, start, end time.Time, recs []WireRecord) []byte {
	rs := make([]appio.Record, len(recs))
	for i, r := range recs {
		rs[i] = appio.Record{FileID: r.ID, PID: r.Pid, C: *r.C}
	}
	return appio.AppendInterval(dst, uint64(start.UnixNano()), uint64(end.UnixNano()), rs)
}

// AppendBye appends a BYE message.
func AppendBye(dst []byte) []byte { return appio.AppendBye(dst) }

// batch is one interval's records, or the goodbye.
type batch struct {
	start, end time.Time
	recs       []Record
	bye        bool
}

// ReportStats count the reporter's work; read them with Load.
type ReportStats struct {
	Intervals atomic.Uint64 // intervals sent
	Dropped   atomic.Uint64 // intervals dropped, all reasons
	// The reasons: the queue was full, no sampler listened, a send failed.
	DroppedQueue, DroppedNoSampler, DroppedSend atomic.Uint64
	Connects                                    atomic.Uint64 // connections made
	SendErrors                                  atomic.Uint64 // connections lost on a write
}

// reporter sends batches to the sampler from its own goroutine: the file
// system hands a batch over a bounded queue and never waits for the socket.
type reporter struct {
	socket   string
	interval time.Duration
	log      *slog.Logger
	q        chan batch
	done     chan struct{}
	stats    *ReportStats

	conn     *net.UnixConn
	failedAt time.Time // of the last failed dial; zero after a success
	// noSampler logs a failing dial once per kind of error.
	noSampler logging.OnChange
	ids       map[idKey]*idEntry // (path, pid) -> file_id on this connection
	nextID    uint32
	gen       uint64
	buf       []byte
	wire      []WireRecord
}

type idKey struct {
	path string
	pid  uint32
}

type idEntry struct {
	id   uint32
	used uint64
}

// redialEvery bounds reconnection attempts while no sampler listens.
const redialEvery = 10 * time.Second

// writeTimeout bounds a send to a sampler that stopped reading.
const writeTimeout = time.Second

func newReporter(socket string, interval time.Duration, log *slog.Logger, stats *ReportStats) *reporter {
	return &reporter{socket: socket, interval: interval, log: log, q: make(chan batch, 8),
		done: make(chan struct{}), stats: stats}
}

// offer queues a batch without waiting; a full queue drops it.
func (r *reporter) offer(b batch) {
	select {
	case r.q <- b:
	default:
		r.stats.Dropped.Add(1)
		r.stats.DroppedQueue.Add(1)
	}
}

// run sends batches until the queue is closed.
func (r *reporter) run() {
	defer close(r.done)
	for b := range r.q {
		r.send(b)
	}
	if r.conn != nil {
		r.conn.Close()
	}
}

func (r *reporter) send(b batch) {
	if b.bye && r.conn == nil {
		return // nobody to say goodbye to
	}
	if r.conn == nil && !r.dial() {
		r.stats.Dropped.Add(1)
		r.stats.DroppedNoSampler.Add(1)
		return
	}
	if !r.sendRecords(b) {
		r.stats.Dropped.Add(1)
		r.stats.DroppedSend.Add(1)
		return
	}
	if b.bye {
		r.write(AppendBye(r.buf[:0]))
		return
	}
	r.stats.Intervals.Add(1)
	r.prune()
}

// sendRecords sends the FILE messages of pairs new on this connection,
// then the records in as many INTERVAL messages as they need. An interval
// with nothing to report sends nothing.
func (r *reporter) sendRecords(b batch) bool {
	r.gen++
	r.wire = r.wire[:0]
	for i := range b.recs {
		rec := &b.recs[i]
		if rec.C == (Counters{}) {
			continue
		}
		id := uint32(0) // the fold, and paths too long for the protocol
		if rec.Path != "" && len(rec.Path) <= appio.MaxString {
			k := idKey{rec.Path, rec.Pid}
			e := r.ids[k]
			if e == nil {
				r.nextID++
				e = &idEntry{id: r.nextID}
				r.ids[k] = e
				if !r.write(AppendFile(r.buf[:0], e.id, flagIofs, rec.Pid, rec.Path)) {
					return false
				}
			}
			e.used = r.gen
			id = e.id
		}
		r.wire = append(r.wire, WireRecord{ID: id, Pid: rec.Pid, C: &rec.C})
	}
	for w := r.wire; len(w) > 0; {
		n := min(len(w), maxRecords)
		if !r.write(AppendInterval(r.buf[:0], b.start, b.end, w[:n])) {
			return false
		}
		w = w[n:]
	}
	return true
}

// prune forgets the file ids of pairs idle for a minute (a later record
// gets a new id and FILE message; ids are never reused on a connection).
func (r *reporter) prune() {
	if r.gen%64 != 0 {
		return
	}
	for k, e := range r.ids {
		if e.used+60 < r.gen {
			delete(r.ids, k)
		}
	}
}

// dial connects and says HELLO. After a failed attempt the next waits
// redialEvery; a lost connection is dialled again at the next interval.
func (r *reporter) dial() bool {
	if !r.failedAt.IsZero() && time.Since(r.failedAt) < redialEvery {
		return false
	}
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: r.socket, Net: "unixpacket"})
	if err != nil {
		r.failedAt = time.Now()
		r.noSampler.Warn(r.log, "no sampler on the appio socket: intervals are dropped (counted) until one listens", err)
		return false
	}
	r.noSampler.Warn(r.log, "", nil)
	r.failedAt = time.Time{}
	r.conn = c
	r.ids = make(map[idKey]*idEntry)
	r.nextID = 0
	exe, _ := os.Executable()
	if !r.write(AppendHello(r.buf[:0], -1, r.interval, exe, os.Getenv("SLURM_JOB_ID"), "vigil iofs")) {
		return false
	}
	r.stats.Connects.Add(1)
	r.log.Info("reporting to the sampler", "socket", r.socket)
	return true
}

// write sends one message; an error closes the connection.
func (r *reporter) write(msg []byte) bool {
	r.buf = msg[:0]
	r.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := r.conn.Write(msg); err != nil {
		r.log.Warn("appio socket write failed; reconnecting later", "socket", r.socket, "err", err)
		r.stats.SendErrors.Add(1)
		r.conn.Close()
		r.conn = nil
		return false
	}
	return true
}

// close sends the goodbye and waits for the queue to drain.
func (r *reporter) close() {
	close(r.q)
	<-r.done
}
