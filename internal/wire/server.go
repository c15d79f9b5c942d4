package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ServerOptions configure Serve.
type ServerOptions struct {
	// Key is the shared key; nil accepts loopback peers only.
	Key []byte
	// Name is sent to peers in the handshake.
	Name   string
	Limits Limits
	// HandshakeTimeout bounds the handshake (default 10s).
	HandshakeTimeout time.Duration
	// ReadTimeout drops a silent peer (default 60s; clients ping every 15s).
	ReadTimeout time.Duration
	// MaxConns caps the listener's connections (default 16384). Further
	// connections are closed at once and counted.
	MaxConns int
	// MaxConnsPerSource caps the connections from one source address (an
	// IPv6 source is its /64), default 4096: children behind a NAT share
	// one address, so this is set for the largest such group.
	MaxConnsPerSource int
	// MaxHandshakes caps connections not yet authenticated (default 1024),
	// MaxHandshakesPerSource those from one source (default 64). Each
	// holds a few KiB for at most HandshakeTimeout; a refused sender
	// retries with backoff, so a reconnect storm from behind a NAT gets
	// through in turns.
	MaxHandshakes          int
	MaxHandshakesPerSource int
	Log                    *slog.Logger
	// Stats, if set, receives the server's counters.
	Stats *ServerStats
	// Metrics, if set, exposes Stats while Serve runs (nil: none);
	// wiremetrics.New(reg) adapts a client_golang Registerer.
	Metrics StatsExporter
	// Interner shares descriptors across connections (nil: a new one).
	Interner *Interner
	// CheckRelayedValues: a RelayHandler's streams have their value codes
	// checked before they are passed on (Decoder.CheckRelayed).
	CheckRelayedValues bool
	// HandledBefore, if set, delays acknowledgements: only frames handled
	// before the time it returns are acknowledged. An aggregator passes its
	// upstream client's DeliveredBefore, so acknowledgements are end to end.
	HandledBefore func() time.Time
	// AckInterval bounds how long a handled frame waits for its Ack
	// (default 1s, at most a quarter of ReadTimeout); AckBytes acknowledges
	// sooner once that many bytes were handled since the last Ack (default
	// 256 KiB). Acks are batched because each one wakes the sender.
	AckInterval time.Duration
	AckBytes    int

	beats *beatSet // set by Serve when the handler is a Keeper
}

// Connection defaults of ServerOptions.
const (
	DefaultMaxConns               = 16384
	DefaultMaxConnsPerSource      = 4096
	DefaultMaxHandshakes          = 1024
	DefaultMaxHandshakesPerSource = 64
)

// Acknowledgement defaults of ServerOptions: a sampler at 10 Hz is woken
// by one Ack every 10 ticks, and a relaying aggregator's upstream by one
// every 256 KiB at most.
const (
	DefaultAckInterval = time.Second
	DefaultAckBytes    = 256 << 10
)

// ServerStats counts what Serve saw.
type ServerStats struct {
	Accepted    atomic.Uint64
	Active      atomic.Int64  // authenticated connections
	Handshaking atomic.Int64  // connections in the handshake
	Refused     atomic.Uint64 // non-loopback peers while no key is set

	// Connections closed on accepting because a cap was reached.
	RejectedConns            atomic.Uint64 // MaxConns
	RejectedSource           atomic.Uint64 // MaxConnsPerSource
	RejectedHandshakes       atomic.Uint64 // MaxHandshakes
	RejectedSourceHandshakes atomic.Uint64 // MaxHandshakesPerSource

	AuthFailures atomic.Uint64
	// ProtocolErrors counts connections closed for a bad frame: malformed,
	// oversized, unknown, or a failed (not refused) handshake. Of these,
	// HandshakeTooLarge were frames above the pre-authentication limit and
	// FrameAuthFailures frames of keyed sessions with a wrong tag (forged,
	// replayed or reordered).
	ProtocolErrors    atomic.Uint64
	HandshakeTooLarge atomic.Uint64
	FrameAuthFailures atomic.Uint64

	// BadValueFrames counts values frames that did not decode: each was
	// dropped with its stream's frames up to its next keyframe, and the
	// connection kept.
	BadValueFrames atomic.Uint64

	Frames atomic.Uint64
	Values atomic.Uint64
	Bytes  atomic.Uint64
	Acks   atomic.Uint64 // Ack frames sent

	interner atomic.Pointer[Interner] // set by Serve
}

// Interned is the number of descriptors the listener's interner holds (0
// before Serve).
func (st *ServerStats) Interned() int {
	if in := st.interner.Load(); in != nil {
		return in.Len()
	}
	return 0
}

// StatsExporter publishes a listener's counters from Export until stop is
// called. An interface, so that package wire does not link client_golang
// into the sampler (package wiremetrics implements it).
type StatsExporter interface {
	Export(st *ServerStats) (stop func(), err error)
}

// EachRejected calls f with each reason a connection is refused on
// accepting and the count so far.
func (st *ServerStats) EachRejected(f func(reason string, n uint64)) {
	for r := range numRejects {
		f(rejectNames[r], st.rejected(r).Load())
	}
}

// Why a connection was refused on accepting; index of rejectNames.
const (
	rejectNotLoopback = iota
	rejectConns
	rejectSource
	rejectHandshakes
	rejectSourceHandshakes
	numRejects
)

var rejectNames = [numRejects]string{"not_loopback", "listener_limit", "source_limit", "handshake_limit", "source_handshake_limit"}

func (st *ServerStats) rejected(reason int) *atomic.Uint64 {
	return [numRejects]*atomic.Uint64{&st.Refused, &st.RejectedConns, &st.RejectedSource,
		&st.RejectedHandshakes, &st.RejectedSourceHandshakes}[reason]
}

// connTable tracks a listener's connections for the caps.
type connTable struct {
	o          *ServerOptions
	mu         sync.Mutex
	conns      map[net.Conn]bool // true once authenticated
	handshakes int
	sources    map[netip.Addr]*sourceCount
}

type sourceCount struct{ conns, handshakes int }

// sourceOf is the address a connection's caps count against: the IP, or
// for IPv6 its /64, which one host commonly holds whole.
func sourceOf(a net.Addr) netip.Addr {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{} // unix sockets: all one source
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.Addr()
	}
	return ip
}

// admit registers a new connection, in the handshake, or returns why not.
func (t *connTable) admit(conn net.Conn, src netip.Addr) (reason int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sc := t.sources[src]
	switch {
	case len(t.conns) >= t.o.MaxConns:
		return rejectConns, false
	case t.handshakes >= t.o.MaxHandshakes:
		return rejectHandshakes, false
	case sc != nil && sc.conns >= t.o.MaxConnsPerSource:
		return rejectSource, false
	case sc != nil && sc.handshakes >= t.o.MaxHandshakesPerSource:
		return rejectSourceHandshakes, false
	}
	if sc == nil {
		sc = &sourceCount{}
		t.sources[src] = sc
	}
	sc.conns++
	sc.handshakes++
	t.handshakes++
	t.conns[conn] = false
	return 0, true
}

// authenticated moves a connection of src out of the handshake count.
func (t *connTable) authenticated(conn net.Conn, src netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns[conn] = true
	t.handshakes--
	t.sources[src].handshakes--
}

// remove forgets a connection; inHandshake if it never authenticated.
func (t *connTable) remove(conn net.Conn, src netip.Addr, inHandshake bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, conn)
	sc := t.sources[src]
	sc.conns--
	if inHandshake {
		sc.handshakes--
		t.handshakes--
	}
	if sc.conns == 0 {
		delete(t.sources, src)
	}
}

// wake ends the reads of authenticated connections, whose loops then
// send a last Ack and return, and closes the others.
func (t *connTable) wake() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, authed := range t.conns {
		if authed {
			_ = c.SetReadDeadline(time.Unix(1, 0))
		} else {
			c.Close()
		}
	}
}

func (t *connTable) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.conns {
		c.Close()
	}
}

// notices logs a kind of event about a subject (a peer) when it starts,
// then again only after a quiet minute with the count in between, so a
// flood of bad peers cannot flood the log. Past maxNoticeSubjects subjects
// in a minute, further ones share the kind's notice.
type notices struct {
	mu   sync.Mutex
	last map[noticeKey]*notice
}

type noticeKey struct{ kind, subject string }

type notice struct {
	at         time.Time
	suppressed int
}

const (
	noticeQuiet       = time.Minute
	maxNoticeSubjects = 256
)

func (n *notices) log(log *slog.Logger, lvl slog.Level, kind, subject, msg string, args ...any) {
	n.mu.Lock()
	now := time.Now()
	k := noticeKey{kind, subject}
	e := n.last[k]
	if e == nil && len(n.last) >= maxNoticeSubjects {
		for key, v := range n.last {
			if now.Sub(v.at) >= noticeQuiet && key.subject != "" {
				delete(n.last, key)
			}
		}
		if len(n.last) >= maxNoticeSubjects {
			k.subject = ""
			e = n.last[k]
		}
	}
	if e == nil {
		e = &notice{}
		n.last[k] = e
	}
	if !e.at.IsZero() && now.Sub(e.at) < noticeQuiet {
		e.at = now
		e.suppressed++
		n.mu.Unlock()
		return
	}
	if e.suppressed > 0 {
		args = append(args, "similar_since_last_notice", e.suppressed)
	}
	e.at, e.suppressed = now, 0
	n.mu.Unlock()
	log.Log(context.Background(), lvl, msg, args...)
}

// Serve accepts connections on ln until ctx is done, decoding each with
// its own Decoder into h. A broken connection is closed and counted; the
// others go on. Serve closes ln and waits for its connections to end.
func Serve(ctx context.Context, ln net.Listener, opts ServerOptions, h Handler) error {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Stats == nil {
		opts.Stats = &ServerStats{}
	}
	if opts.Interner == nil {
		opts.Interner = NewInterner(0)
	}
	opts.Stats.interner.Store(opts.Interner)
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&opts.MaxConns, DefaultMaxConns)
	def(&opts.MaxConnsPerSource, DefaultMaxConnsPerSource)
	def(&opts.MaxHandshakes, DefaultMaxHandshakes)
	def(&opts.MaxHandshakesPerSource, DefaultMaxHandshakesPerSource)
	if opts.HandshakeTimeout <= 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = 60 * time.Second
	}
	if opts.AckInterval <= 0 {
		opts.AckInterval = DefaultAckInterval
	}
	opts.AckInterval = min(opts.AckInterval, opts.ReadTimeout/4)
	def(&opts.AckBytes, DefaultAckBytes)
	opts.Limits = opts.Limits.withDefaults()
	log := opts.Log.With("component", "wire", "listen", ln.Addr().String())
	if opts.Key == nil {
		log.Warn("no key set: accepting loopback peers only")
	}
	if opts.Metrics != nil {
		stopExport, err := opts.Metrics.Export(opts.Stats)
		if err != nil {
			ln.Close()
			return fmt.Errorf("export wire metrics of %s: %w", ln.Addr(), err)
		}
		defer stopExport()
	}

	table := &connTable{o: &opts, conns: map[net.Conn]bool{}, sources: map[netip.Addr]*sourceCount{}}
	nt := &notices{last: map[noticeKey]*notice{}}
	var wg sync.WaitGroup
	served := make(chan struct{})
	defer close(served) // after wg.Wait
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		table.wake()
		go func() { // a connection that does not end by itself
			select {
			case <-time.After(shutdownGrace):
				table.closeAll()
			case <-served:
			}
		}()
	})
	defer stop()
	defer wg.Wait()
	if _, ok := h.(Keeper); ok {
		opts.beats = &beatSet{set: map[*holdBeat]struct{}{}}
		bctx, cancel := context.WithCancel(ctx)
		defer cancel() // runs before wg.Wait: Serve may end on an accept error
		wg.Add(1)
		go func() { defer wg.Done(); opts.beats.run(bctx) }()
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
			}
			// Out of descriptors and the like: wait rather than spin.
			log.Warn("accept failed", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		src := sourceOf(conn.RemoteAddr())
		reason, ok := rejectNotLoopback, opts.Key != nil || isLocal(conn.RemoteAddr())
		if ok {
			reason, ok = table.admit(conn, src)
		}
		if !ok {
			reject(conn, &opts, reason, nt, log)
			continue
		}
		opts.Stats.Accepted.Add(1)
		opts.Stats.Handshaking.Add(1)
		if ctx.Err() != nil { // raced with shutdown
			conn.Close()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			authed := serveConn(ctx, conn, &opts, log, nt, h, func() {
				table.authenticated(conn, src)
				opts.Stats.Handshaking.Add(-1)
			})
			conn.Close()
			if !authed {
				opts.Stats.Handshaking.Add(-1)
			}
			table.remove(conn, src, !authed)
		}()
	}
}

// shutdownGrace bounds how long Serve waits, once ctx is done, for a
// connection to send its last Ack before it is closed.
const shutdownGrace = time.Second

// reject tells a refused peer why, if its socket takes the bytes at once,
// and closes it.
func reject(conn net.Conn, o *ServerOptions, reason int, nt *notices, log *slog.Logger) {
	n := o.Stats.rejected(reason).Add(1)
	var msg string
	var limit int
	switch reason {
	case rejectNotLoopback:
		msg = "no key set: loopback peers only"
	case rejectConns:
		msg, limit = "connection limit of the listener reached", o.MaxConns
	case rejectSource:
		msg, limit = "connection limit per source address reached", o.MaxConnsPerSource
	case rejectHandshakes:
		msg, limit = "limit of connections in the handshake reached", o.MaxHandshakes
	case rejectSourceHandshakes:
		msg, limit = "limit of connections in the handshake per source address reached", o.MaxHandshakesPerSource
	}
	subject := ""
	if reason != rejectConns && reason != rejectHandshakes {
		subject = sourceOf(conn.RemoteAddr()).String()
	}
	nt.log(log, slog.LevelWarn, rejectNames[reason], subject, "refusing connections: "+msg,
		"reason", rejectNames[reason], "limit", limit, "peer", conn.RemoteAddr().String(), "refused_total", n)
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	_, _ = conn.Write(appendClose(nil, msg))
	conn.Close()
}

func isLocal(a net.Addr) bool {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// isProtocolError tells a broken or hostile peer from a network failure.
func isProtocolError(err error) bool {
	for _, e := range []error{ErrMalformed, ErrChecksum, ErrFrameTooLarge, ErrVersion, ErrUnknownFrame, ErrLimit, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// serveConn runs one connection; it reports whether the peer authenticated
// (after which it called authed).
func serveConn(ctx context.Context, conn net.Conn, o *ServerOptions, log *slog.Logger, nt *notices, h Handler, authed func()) bool {
	addr := conn.RemoteAddr().String()
	src := sourceOf(conn.RemoteAddr()).String()
	st := o.Stats
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	// Until the peer is authenticated it gets a small buffer and frames of
	// at most maxHandshakeFrame: unauthenticated connections cost little.
	small := bufio.NewReaderSize(conn, 2*maxHandshakeFrame)
	fr := NewFrameReader(small, maxHandshakeFrame)
	_ = conn.SetDeadline(time.Now().Add(o.HandshakeTimeout))
	name, sess, err := serverHandshake(conn, fr, o.Key, o.Name)
	if err != nil {
		switch {
		case errors.Is(err, ErrAuth):
			st.AuthFailures.Add(1)
			nt.log(log, slog.LevelWarn, "auth", src+" "+name, "peer failed authentication", "peer", addr, "name", name, "err", err)
		case errors.Is(err, ErrFrameTooLarge):
			st.ProtocolErrors.Add(1)
			st.HandshakeTooLarge.Add(1)
			nt.log(log, slog.LevelWarn, "handshake-size", src, "handshake failed: frame larger than a hello", "peer", addr, "err", err)
		default:
			st.ProtocolErrors.Add(1)
			nt.log(log, slog.LevelWarn, "handshake", src, "handshake failed", "peer", addr, "err", err)
		}
		return false
	}
	authed()
	_ = conn.SetDeadline(time.Time{})
	var send *frameMAC
	if sess != nil {
		send = sess.send
	}
	// Bytes the peer sent after its handshake may sit in small; reading
	// through it keeps them (once empty it passes big reads straight on).
	br := bufio.NewReaderSize(small, 64<<10)
	mac := fr.mac
	fr = NewFrameReader(br, o.Limits.MaxFrame)
	fr.mac = mac
	peer := Peer{Addr: addr, Name: name}
	st.Active.Add(1)
	defer st.Active.Add(-1)
	log.Debug("peer connected", "peer", addr, "name", name)
	h.Connect(peer)
	badValues := func(node string) {
		nt.log(log, slog.LevelWarn, "bad-values", src+" "+node, "dropped a values frame that did not decode; the node's stream resumes at its next keyframe",
			"peer", addr, "name", name, "node", node)
	}
	err = readLoop(ctx, conn, br, fr, send, o, h, badValues)
	switch {
	case err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil:
		err = nil
		log.Debug("peer disconnected", "peer", addr, "name", name)
	case errors.Is(err, ErrFrameAuth):
		st.ProtocolErrors.Add(1)
		st.FrameAuthFailures.Add(1)
		nt.log(log, slog.LevelWarn, "frame-auth", src+" "+name, "closing connection: a frame failed authentication (injected or replayed?)",
			"peer", addr, "name", name, "err", err)
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(send.seal(nil, appendClose(nil, err.Error())))
	case errors.Is(err, ErrNotKept):
		log.Warn("closing connection: frame not kept", "peer", addr, "name", name)
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(send.seal(nil, appendClose(nil, err.Error())))
	case isProtocolError(err):
		st.ProtocolErrors.Add(1)
		nt.log(log, slog.LevelWarn, "protocol", src+" "+name, "closing connection: protocol error", "peer", addr, "name", name, "err", err)
		// Tell the peer why, so its log says more than "connection reset".
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(send.seal(nil, appendClose(nil, err.Error())))
	default:
		log.Info("connection lost", "peer", addr, "name", name, "err", err)
	}
	h.Disconnect(peer, err)
	return true
}

// acker acknowledges a connection's handled bytes in batches. Each Ack
// wakes the sender (a sampler at 10 Hz would be woken once more every
// tick), so an Ack goes out once the oldest unacknowledged frame has
// waited AckInterval or once AckBytes more are handled, whichever comes
// first, and before the connection ends.
type acker struct {
	conn     net.Conn
	send     *frameMAC // a keyed session's tags (nil: CRC)
	hb       *holdBeat // set when the handler is a Keeper
	st       *ServerStats
	interval time.Duration
	bytes    uint64
	before   func() time.Time // ServerOptions.HandledBefore

	processed, acked uint64    // frame bytes handled, and acknowledged
	due              time.Time // when to acknowledge; zero: nothing pending
	nextAt           uint64    // processed at which to acknowledge early
	marks            []mark    // with before: handled offsets not yet acknowledged, oldest first
	payload, frame   []byte
	sealed           []byte
}

type mark struct {
	off uint64
	at  time.Time
}

// handled records a frame of size bytes as handled at now.
func (a *acker) handled(size uint64, now time.Time) {
	a.processed += size
	if a.due.IsZero() {
		a.due = now.Add(a.interval)
	}
	if a.before != nil {
		if len(a.marks) >= 1<<16 { // bound: merge into the newest mark
			a.marks = a.marks[:len(a.marks)-1]
		}
		a.marks = append(a.marks, mark{a.processed, now})
	}
}

// ack sends an Ack if one is due at now or, with final, whatever may be
// acknowledged at all.
func (a *acker) ack(now time.Time, final bool) error {
	if a.due.IsZero() || !final && now.Before(a.due) && a.processed < a.nextAt {
		return nil
	}
	a.nextAt = a.processed + a.bytes
	upTo := a.processed
	if a.before != nil {
		// Only frames handled before the oldest tick the handler's own
		// upstream has not acknowledged: acknowledgements end to end.
		wm := a.before()
		upTo = a.acked
		i := 0
		for ; i < len(a.marks) && a.marks[i].at.Before(wm); i++ {
			upTo = a.marks[i].off
		}
		a.marks = append(a.marks[:0], a.marks[i:]...)
	}
	a.due = time.Time{}
	if upTo < a.processed {
		a.due = now.Add(a.interval) // try again
	}
	if upTo <= a.acked {
		return nil
	}
	timeout := 5 * time.Second
	if final {
		timeout = time.Second
	}
	a.payload = binary.AppendUvarint(a.payload[:0], upTo)
	a.frame = appendFrame(a.frame[:0], frameAck, a.payload)
	if a.hb != nil {
		a.hb.mu.Lock() // the heartbeat seals too: one tag sequence
	}
	a.sealed = a.send.seal(a.sealed[:0], a.frame)
	_ = a.conn.SetWriteDeadline(now.Add(timeout))
	_, err := a.conn.Write(a.sealed)
	if a.hb != nil {
		a.hb.acked.Store(upTo)
		a.hb.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("write ack: %w", err)
	}
	a.acked = upTo
	a.st.Acks.Add(1)
	return nil
}

// readLoop handles a connection's frames until it ends. It acknowledges
// handled bytes, so a sender learns which ticks were handled before a
// crash here and reports the others as gaps; with HandledBefore a frame
// counts once the handler's own upstream has it.
func readLoop(ctx context.Context, conn net.Conn, br *bufio.Reader, fr *FrameReader, send *frameMAC, o *ServerOptions, h Handler,
	badValues func(node string)) error {
	dec := NewDecoder(o.Limits, o.Interner)
	dec.CheckRelayed = o.CheckRelayedValues
	st := o.Stats
	a := &acker{conn: conn, send: send, st: st, interval: o.AckInterval, bytes: uint64(o.AckBytes),
		nextAt: uint64(o.AckBytes), before: o.HandledBefore}
	keeper, _ := h.(Keeper)
	drainer, _ := h.(Drainer)
	if keeper != nil && o.beats != nil { // only a Keeper holds frames
		a.hb = o.beats.add(conn, send)
		defer o.beats.remove(a.hb)
	}
	// end acknowledges what was handled before the connection closes on
	// the peer's Close, at shutdown, or for a frame that failed (which is
	// not counted as handled). A read error at other times means the
	// peer is gone.
	end := func(err error, readErr bool) error {
		if ctx.Err() != nil {
			err = nil
		}
		if err == nil || !readErr {
			_ = a.ack(time.Now(), true)
		}
		return err
	}
	// deadline is the read deadline that drops a silent peer; zero while
	// an earlier one is set to wake up when an Ack is due.
	var deadline time.Time
	lastFrame := time.Now()
	now, frames := lastFrame, 0
	for {
		if err := a.ack(now, false); err != nil {
			return err
		}
		// Before waiting for input: a keyframe request must not wait for
		// the sender's next frame.
		if err := dec.sendKeyRequests(conn, send, a.hb, br.Buffered() == 0); err != nil {
			return err
		}
		if !a.due.IsZero() && br.Buffered() == 0 {
			// Wait for input only until the Ack is due. Peek takes no
			// bytes, so a timeout here cuts no frame in half.
			deadline = time.Time{}
			_ = conn.SetReadDeadline(a.due)
			if ctx.Err() != nil { // Serve's wake-up may predate this deadline
				return end(nil, false)
			}
			if _, err := br.Peek(1); err != nil {
				// Unless silent too long: with HandledBefore an Ack may
				// stay due for as long as the upstream is away.
				if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil && time.Since(lastFrame) < o.ReadTimeout {
					now = time.Now()
					continue
				}
				return end(err, true)
			}
			now = time.Now()
		}
		// Moving the deadline every frame is wasted work at thousands of
		// frames a second; a quarter of the timeout is precise enough.
		if deadline.Sub(now) < o.ReadTimeout*3/4 {
			deadline = now.Add(o.ReadTimeout)
			_ = conn.SetReadDeadline(deadline)
			if ctx.Err() != nil {
				return end(nil, false)
			}
		}
		buffered := br.Buffered()
		typ, payload, err := fr.Next()
		if err != nil {
			return end(err, true)
		}
		// The clock is read when the frame took a read from the
		// connection, else every clockEvery frames: at thousands of
		// frames a second, a read per frame is a tenth of a relay's work.
		size := uint64(len(payload) + headerSize + fr.trailer())
		if frames++; uint64(buffered) < size || frames%clockEvery == 0 {
			now = time.Now()
		}
		lastFrame = now
		st.Frames.Add(1)
		st.Bytes.Add(size)
		if typ == frameClose {
			return end(nil, false)
		}
		if typ == framePing {
			a.handled(size, now)
			continue
		}
		before, bad := dec.Values, dec.BadFrames
		var unkept uint64
		if keeper != nil {
			unkept = keeper.Unkept()
		}
		if a.hb != nil {
			a.hb.busy.Store(now.UnixNano())
		}
		dec.Now = now
		err = dec.Decode(typ, payload, h)
		if a.hb != nil {
			a.hb.busy.Store(0)
		}
		if err != nil {
			return end(err, false)
		}
		if keeper != nil && keeper.Unkept() != unkept {
			return end(ErrNotKept, false) // handled means kept: no ack for this frame
		}
		if n := dec.Values - before; n > 0 {
			st.Values.Add(n)
		}
		if dec.BadFrames != bad {
			st.BadValueFrames.Add(dec.BadFrames - bad)
			badValues(dec.badNode)
		}
		a.handled(size, now)
		if drainer != nil && br.Buffered() == 0 {
			drainer.Drained()
		}
	}
}

// clockEvery is how many frames taken from the read buffer share a clock
// reading in readLoop: at a few µs a frame, they are tens of µs apart.
const clockEvery = 16
