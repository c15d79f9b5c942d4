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
	Log         *slog.Logger
	// Stats, if set, receives the server's counters.
	Stats *ServerStats
	// Interner shares descriptors across connections (nil: a new one).
	Interner *Interner
	// HandledBefore, if set, delays acknowledgements: only frames handled
	// before the time it returns are acknowledged. An aggregator passes its
	// upstream client's DeliveredBefore, so acknowledgements are end to end.
	HandledBefore func() time.Time

	beats *beatSet // set by Serve when the handler is a Keeper
}

// ServerStats counts what Serve saw.
type ServerStats struct {
	Accepted       atomic.Uint64
	Active         atomic.Int64
	Refused        atomic.Uint64 // non-loopback peers while no key is set
	AuthFailures   atomic.Uint64
	ProtocolErrors atomic.Uint64 // malformed, oversized, unknown frames; closed
	Frames         atomic.Uint64
	Values         atomic.Uint64
	Bytes          atomic.Uint64
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

	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
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
		opts.Stats.Accepted.Add(1)
		mu.Lock()
		conns[conn] = struct{}{}
		mu.Unlock()
		if ctx.Err() != nil { // raced with shutdown
			conn.Close()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveConn(ctx, conn, &opts, log, h)
			conn.Close()
			mu.Lock()
			delete(conns, conn)
			mu.Unlock()
		}()
	}
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

func serveConn(ctx context.Context, conn net.Conn, o *ServerOptions, log *slog.Logger, h Handler) {
	addr := conn.RemoteAddr().String()
	st := o.Stats
	if o.Key == nil && !isLocal(conn.RemoteAddr()) {
		st.Refused.Add(1)
		log.Warn("refused non-loopback peer: no key set", "peer", addr)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	fr := NewFrameReader(br, o.Limits.MaxFrame)
	_ = conn.SetDeadline(time.Now().Add(o.HandshakeTimeout))
	name, err := serverHandshake(conn, fr, o.Key, o.Name)
	if err != nil {
		if errors.Is(err, ErrAuth) {
			st.AuthFailures.Add(1)
			log.Warn("peer failed authentication", "peer", addr, "name", name, "err", err)
		} else {
			st.ProtocolErrors.Add(1)
			log.Warn("handshake failed", "peer", addr, "err", err)
		}
		return
	}
	_ = conn.SetDeadline(time.Time{})
	peer := Peer{Addr: addr, Name: name}
	st.Active.Add(1)
	defer st.Active.Add(-1)
	log.Debug("peer connected", "peer", addr, "name", name)
	h.Connect(peer)
	err = readLoop(conn, br, fr, o, h)
	switch {
	case err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil:
		err = nil
		log.Debug("peer disconnected", "peer", addr, "name", name)
	case errors.Is(err, ErrNotKept):
		log.Warn("closing connection: frame not kept", "peer", addr, "name", name)
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(appendClose(nil, err.Error()))
	case isProtocolError(err):
		st.ProtocolErrors.Add(1)
		log.Warn("closing connection: protocol error", "peer", addr, "name", name, "err", err)
		// Tell the peer why, so its log says more than "connection reset".
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(appendClose(nil, err.Error()))
	default:
		log.Info("connection lost", "peer", addr, "name", name, "err", err)
	}
	h.Disconnect(peer, err)
}

// ackEvery bounds how many frames go unacknowledged while more data is
// already waiting; otherwise an ack goes out whenever the input drains.
const ackEvery = 64

func readLoop(conn net.Conn, br *bufio.Reader, fr *FrameReader, o *ServerOptions, h Handler) error {
	dec := NewDecoder(o.Limits, o.Interner)
	st := o.Stats
	var deadline time.Time
	// Acknowledge processed bytes, so a sender learns which ticks were
	// handled before a crash here and reports the others as gaps. With
	// HandledBefore, a frame counts once the handler's own upstream has it.
	var processed, ackedAt uint64
	sinceAck := 0
	var ack []byte
	type mark struct {
		off uint64
		at  time.Time
	}
	var marks []mark // processed offsets not yet acknowledged, oldest first
	keeper, _ := h.(Keeper)
	var hb *holdBeat // only a Keeper holds frames
	if keeper != nil && o.beats != nil {
		hb = o.beats.add(conn)
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
					hb.mu.Lock()
				}
				_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
				_, err := conn.Write(ack)
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
		typ, payload, err := fr.Next()
		if err != nil {
			return err
		}
		st.Frames.Add(1)
		st.Bytes.Add(uint64(len(payload) + headerSize + trailerSize))
		if typ == frameClose {
			return nil
		}
		if typ == framePing {
			processed += uint64(len(payload) + headerSize + trailerSize)
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
		processed += uint64(len(payload) + headerSize + trailerSize)
		sinceAck++
		if o.HandledBefore != nil {
			if len(marks) >= 1<<16 { // bound: merge into the newest mark
				marks = marks[:len(marks)-1]
			}
			marks = append(marks, mark{processed, time.Now()})
		}
	}
}
