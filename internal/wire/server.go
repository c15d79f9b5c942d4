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
	// HandledBefore, if set, delays acknowledgements: only frames handled
	// before the time it returns are acknowledged. An aggregator passes its
	// upstream client's DeliveredBefore, so acknowledgements are end to end.
	HandledBefore func() time.Time

	beats *beatSet // set by Serve when the handler is a Keeper
}

// Connection defaults of ServerOptions.
const (
	DefaultMaxConns               = 16384
	DefaultMaxConnsPerSource      = 4096
	DefaultMaxHandshakes          = 1024
	DefaultMaxHandshakesPerSource = 64
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

	Frames atomic.Uint64
	Values atomic.Uint64
	Bytes  atomic.Uint64
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
	conns      map[net.Conn]struct{}
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
	t.conns[conn] = struct{}{}
	return 0, true
}

// authenticated moves a connection of src out of the handshake count.
func (t *connTable) authenticated(src netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
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

	table := &connTable{o: &opts, conns: map[net.Conn]struct{}{}, sources: map[netip.Addr]*sourceCount{}}
	nt := &notices{last: map[noticeKey]*notice{}}
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		table.closeAll()
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
				table.authenticated(src)
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
	err = readLoop(conn, br, fr, send, o, h)
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

// ackEvery bounds how many frames go unacknowledged while more data is
// already waiting; otherwise an ack goes out whenever the input drains.
const ackEvery = 64

func readLoop(conn net.Conn, br *bufio.Reader, fr *FrameReader, send *frameMAC, o *ServerOptions, h Handler) error {
	dec := NewDecoder(o.Limits, o.Interner)
	st := o.Stats
	var deadline time.Time
	// Acknowledge processed bytes, so a sender learns which ticks were
	// handled before a crash here and reports the others as gaps. With
	// HandledBefore, a frame counts once the handler's own upstream has it.
	var processed, ackedAt uint64
	sinceAck := 0
	var ack, sealed []byte
	type mark struct {
		off uint64
		at  time.Time
	}
	var marks []mark // processed offsets not yet acknowledged, oldest first
	keeper, _ := h.(Keeper)
	var hb *holdBeat // only a Keeper holds frames
	if keeper != nil && o.beats != nil {
		hb = o.beats.add(conn, send)
		defer o.beats.remove(hb)
	}
	for {
		if processed > ackedAt && (sinceAck >= ackEvery || br.Buffered() == 0) {
			upTo := processed
			if o.HandledBefore != nil {
				wm := o.HandledBefore()
				upTo = ackedAt
				i := 0
				for ; i < len(marks) && marks[i].at.Before(wm); i++ {
					upTo = marks[i].off
				}
				marks = append(marks[:0], marks[i:]...)
			}
			if upTo > ackedAt {
				ack = appendFrame(ack[:0], frameAck, binary.AppendUvarint(nil, upTo))
				if hb != nil {
					hb.mu.Lock() // the heartbeat seals too: one tag sequence
				}
				sealed = send.seal(sealed[:0], ack)
				_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
				_, err := conn.Write(sealed)
				if hb != nil {
					hb.acked.Store(upTo)
					hb.mu.Unlock()
				}
				if err != nil {
					return fmt.Errorf("write ack: %w", err)
				}
				ackedAt = upTo
			}
			sinceAck = 0
		}
		// Moving the deadline every frame is wasted work at thousands of
		// frames a second; a quarter of the timeout is precise enough.
		if now := time.Now(); deadline.Sub(now) < o.ReadTimeout*3/4 {
			deadline = now.Add(o.ReadTimeout)
			_ = conn.SetReadDeadline(deadline)
		}
		if err := dec.sendKeyRequests(conn, send, hb, br.Buffered() == 0); err != nil {
			return err
		}
		typ, payload, err := fr.Next()
		if err != nil {
			return err
		}
		size := uint64(len(payload) + headerSize + fr.trailer())
		st.Frames.Add(1)
		st.Bytes.Add(size)
		if typ == frameClose {
			return nil
		}
		if typ == framePing {
			processed += size
			continue
		}
		before := dec.Values
		var unkept uint64
		if keeper != nil {
			unkept = keeper.Unkept()
		}
		if hb != nil {
			hb.busy.Store(time.Now().UnixNano())
		}
		err = dec.Decode(typ, payload, h)
		if hb != nil {
			hb.busy.Store(0)
		}
		if err != nil {
			return err
		}
		if keeper != nil && keeper.Unkept() != unkept {
			return ErrNotKept // handled means kept: no ack for this frame
		}
		if n := dec.Values - before; n > 0 {
			st.Values.Add(n)
		}
		processed += size
		sinceAck++
		if o.HandledBefore != nil {
			if len(marks) >= 1<<16 { // bound: merge into the newest mark
				marks = marks[:len(marks)-1]
			}
			marks = append(marks, mark{processed, time.Now()})
		}
	}
}
