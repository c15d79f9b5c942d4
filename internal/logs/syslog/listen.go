package syslog

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Sink takes parsed messages. Submit returns once the messages are durable
// and blocks while the sink cannot keep up: TCP connections are not read
// meanwhile, which is how backpressure reaches senders. The sink must not
// keep msgs, or the strings' frames beyond what it copies, after it returns.
type Sink interface {
	Submit(ctx context.Context, msgs []Message) error
}

// Stats counts what the listeners saw. Read with the atomic Load methods.
type Stats struct {
	Received    atomic.Uint64 // messages handed to the sink, malformed included
	Malformed   atomic.Uint64 // messages kept raw because they followed neither RFC
	Truncated   atomic.Uint64 // newline frames cut at the maximum size
	Rejected    atomic.Uint64 // octet-counted frames skipped (too large)
	UDPDropped  atomic.Uint64 // datagrams dropped because the queue was full
	ConnsOpen   atomic.Int64  // TCP and TLS connections open now
	ConnsTotal  atomic.Uint64 // TCP and TLS connections accepted
	SinkErrors  atomic.Uint64 // batches the sink refused (the connection is closed)
	UDPReceived atomic.Uint64 // datagrams read
	// UDPKernelDropped counts datagrams the kernel dropped (socket buffer
	// full), as reported by SO_RXQ_OVFL with the next datagram read.
	UDPKernelDropped atomic.Uint64
}

// Config selects the listeners; an empty address disables one.
type Config struct {
	UDPAddr   string
	TCPAddr   string
	TLSAddr   string
	TLSConfig *tls.Config    // required when TLSAddr is set
	MaxFrame  int            // largest message in bytes; DefaultMaxFrame when 0
	Location  *time.Location // zone of RFC 3164 timestamps; time.Local when nil
	UDPQueue  int            // datagrams buffered before dropping; 8192 when 0
	BatchSize int            // messages per Submit; 1024 when 0
	// UDPReadBuffer is the socket's receive buffer in bytes (8 MiB when
	// 0), which absorbs bursts; the kernel may cap it (net.core.rmem_max)
	// unless the process may override that (CAP_NET_ADMIN).
	UDPReadBuffer int
	Limits        Limits   // TCP and TLS connections
	Metrics       *Metrics // nil: counted but not registered anywhere
}

// Server runs the listeners of one Config.
type Server struct {
	cfg   Config
	sink  Sink
	log   *slog.Logger
	stats Stats

	udp   *net.UDPConn
	tcp   net.Listener
	tlsLn net.Listener

	m       *Metrics
	notes   *Notes
	tcpSet  *ConnSet
	tlsSet  *ConnSet
	udpSeen uint32 // last SO_RXQ_OVFL count, owned by readUDP
}

// NewServer returns a server; Listen binds its sockets.
func NewServer(cfg Config, sink Sink, log *slog.Logger) *Server {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = DefaultMaxFrame
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.UDPQueue <= 0 {
		cfg.UDPQueue = 8192
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1024
	}
	if cfg.UDPReadBuffer <= 0 {
		cfg.UDPReadBuffer = 8 << 20
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, sink: sink, log: log, m: cfg.Metrics, notes: NewNotes(log)}
	s.tcpSet = NewConnSet(TransportTCP, cfg.Limits, s.m, s.notes, log)
	s.tlsSet = NewConnSet(TransportTLS, cfg.Limits, s.m, s.notes, log)
	return s
}

// Stats returns the live counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Listen binds the configured sockets, so that their addresses are known
// (port 0) before Run.
func (s *Server) Listen() error {
	if s.cfg.TLSAddr != "" && s.cfg.TLSConfig == nil {
		return errors.New("syslog: TLS address set without certificate")
	}
	if a := s.cfg.UDPAddr; a != "" {
		ua, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			return fmt.Errorf("syslog: resolve udp %s: %w", a, err)
		}
		if s.udp, err = net.ListenUDP("udp", ua); err != nil {
			return fmt.Errorf("syslog: listen udp %s: %w", a, err)
		}
		got, err := setReadBuffer(s.udp, s.cfg.UDPReadBuffer)
		if err != nil || got < s.cfg.UDPReadBuffer {
			s.log.Warn("udp receive buffer smaller than asked; raise net.core.rmem_max", "asked", s.cfg.UDPReadBuffer, "got", got, "err", err)
		}
		if err := enableDropCount(s.udp); err != nil {
			s.log.Warn("kernel drops of udp datagrams cannot be counted", "err", err)
		}
	}
	var err error
	if a := s.cfg.TCPAddr; a != "" {
		if s.tcp, err = net.Listen("tcp", a); err != nil {
			s.Close()
			return fmt.Errorf("syslog: listen tcp %s: %w", a, err)
		}
	}
	if a := s.cfg.TLSAddr; a != "" {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			s.Close()
			return fmt.Errorf("syslog: listen tls %s: %w", a, err)
		}
		s.tlsLn = tls.NewListener(ln, s.cfg.TLSConfig)
	}
	return nil
}

// Addrs returns the bound addresses, nil for disabled listeners.
func (s *Server) Addrs() (udp, tcp, tlsAddr net.Addr) {
	if s.udp != nil {
		udp = s.udp.LocalAddr()
	}
	if s.tcp != nil {
		tcp = s.tcp.Addr()
	}
	if s.tlsLn != nil {
		tlsAddr = s.tlsLn.Addr()
	}
	return
}

// Close closes the sockets and open connections.
func (s *Server) Close() {
	if s.udp != nil {
		s.udp.Close()
	}
	if s.tcp != nil {
		s.tcp.Close()
	}
	if s.tlsLn != nil {
		s.tlsLn.Close()
	}
	s.tcpSet.CloseAll()
	s.tlsSet.CloseAll()
}

// Run serves until ctx is done, then closes everything and waits for the
// connection goroutines, whose last batches are still submitted.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if s.udp != nil {
		q := make(chan Message, s.cfg.UDPQueue)
		wg.Add(2)
		go func() { defer wg.Done(); defer close(q); s.readUDP(q) }()
		go func() { defer wg.Done(); s.drainUDP(ctx, q) }()
	}
	for _, l := range []struct {
		ln  net.Listener
		set *ConnSet
	}{{s.tcp, s.tcpSet}, {s.tlsLn, s.tlsSet}} {
		if l.ln == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.set.Serve(ctx, l.ln, &wg, func(c net.Conn) string { return s.serveConn(ctx, c, l.set) })
		}()
	}
	<-ctx.Done()
	s.Close()
	wg.Wait()
	return nil
}

func (s *Server) readUDP(q chan<- Message) {
	buf := make([]byte, s.cfg.MaxFrame)
	oob := make([]byte, oobSize)
	for {
		n, oobn, _, addr, err := s.udp.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("udp read failed", "err", err)
			}
			return
		}
		if d := s.kernelDrops(oob[:oobn]); d > 0 {
			s.stats.UDPKernelDropped.Add(uint64(d))
			s.m.Dropped.WithLabelValues(TransportUDP, ReasonKernelOverflow).Add(float64(d))
			s.notes.Warn("udp kernel overflow", "udp datagrams dropped by the kernel: socket buffer full",
				"dropped", d, "buffer_bytes", s.cfg.UDPReadBuffer)
		}
		s.stats.UDPReceived.Add(1)
		var m Message
		Parse(buf[:n], time.Now(), s.cfg.Location, &m)
		if m.Host == "" {
			m.Host = addr.Addr().Unmap().String()
		}
		select {
		case q <- m:
		default:
			s.stats.UDPDropped.Add(1)
			s.m.Dropped.WithLabelValues(TransportUDP, ReasonQueueFull).Inc()
			s.notes.Warn("udp queue full", "udp datagrams dropped: the store does not keep up", "queue", s.cfg.UDPQueue)
		}
	}
}

// kernelDrops returns how many datagrams the kernel dropped since the
// last datagram that reported a count. The socket's counter arrives with
// the next datagram that gets through.
func (s *Server) kernelDrops(oob []byte) uint32 {
	total, ok := parseDropCount(oob)
	if !ok {
		return 0
	}
	d := total - s.udpSeen // wraps like the kernel's counter
	s.udpSeen = total
	return d
}

// drainUDP batches queued datagrams into the sink. It uses a context that
// outlives ctx so the queue is flushed after the socket closes.
func (s *Server) drainUDP(ctx context.Context, q <-chan Message) {
	batch := make([]Message, 0, s.cfg.BatchSize)
	sctx := context.WithoutCancel(ctx)
	for m := range q {
		batch = append(batch[:0], m)
	fill:
		for len(batch) < cap(batch) {
			select {
			case m, ok := <-q:
				if !ok {
					break fill
				}
				batch = append(batch, m)
			default:
				break fill
			}
		}
		s.submit(sctx, TransportUDP, batch)
		clear(batch)
	}
}

func (s *Server) submit(ctx context.Context, transport string, batch []Message) bool {
	var mal, trunc int
	for i := range batch {
		if batch[i].Malformed {
			mal++
		}
		if batch[i].Truncated {
			trunc++
		}
	}
	s.stats.Malformed.Add(uint64(mal))
	s.stats.Truncated.Add(uint64(trunc))
	s.m.Malformed.WithLabelValues(transport).Add(float64(mal))
	s.m.Truncated.WithLabelValues(transport).Add(float64(trunc))
	if err := s.sink.Submit(ctx, batch); err != nil {
		s.stats.SinkErrors.Add(1)
		s.m.Dropped.WithLabelValues(transport, ReasonStoreError).Add(float64(len(batch)))
		s.notes.Warn("store error", "store refused messages", "err", err, "messages", len(batch), "transport", transport)
		return false
	}
	s.stats.Received.Add(uint64(len(batch)))
	s.m.Received.WithLabelValues(transport).Add(float64(len(batch)))
	return true
}

// serveConn reads one TCP or TLS connection until it ends and returns why
// the server closed it ("" when the peer did).
func (s *Server) serveConn(ctx context.Context, c net.Conn, set *ConnSet) string {
	transport := set.transport
	s.stats.ConnsOpen.Add(1)
	s.stats.ConnsTotal.Add(1)
	defer s.stats.ConnsOpen.Add(-1)
	peer := remoteAddr(c).String()
	lim := set.Limits()
	if tc, ok := c.(*tls.Conn); ok && lim.FrameTimeout > 0 {
		// A handshake is a begun frame: it may not hold the slot for the
		// idle timeout.
		_ = c.SetDeadline(time.Now().Add(lim.FrameTimeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			s.notes.Warn("tls handshake", "tls handshake failed", "peer", c.RemoteAddr().String(), "err", err)
			if r := CloseReason(err, true); r != "" {
				return r
			}
			return ""
		}
		_ = c.SetDeadline(time.Time{})
	}
	fr := NewFramer(c, s.cfg.MaxFrame)
	fr.SetTimeouts(c, lim.IdleTimeout, lim.FrameTimeout)
	// Grown as messages come, given back when the connection goes quiet:
	// an idle connection holds no batch.
	var batch []Message
	// Messages already read are submitted even after shutdown began.
	sctx := context.WithoutCancel(ctx)
	for {
		frame, trunc, err := fr.Next()
		if errors.Is(err, ErrRejected) {
			s.stats.Rejected.Add(1)
			s.m.Rejected.WithLabelValues(transport, ReasonTooLarge).Inc()
			s.notes.Warn(transport+" too large", "frame rejected", "transport", transport, "peer", c.RemoteAddr().String(), "err", err)
			continue
		}
		if err != nil {
			if len(batch) > 0 {
				s.submit(sctx, transport, batch)
			}
			if reason := CloseReason(err, fr.Partial()); reason != "" {
				return reason
			}
			if !errors.Is(err, net.ErrClosed) && !isEOF(err) {
				s.log.Debug("connection ended", "peer", c.RemoteAddr().String(), "err", err)
			}
			return ""
		}
		batch = append(batch, Message{})
		m := &batch[len(batch)-1]
		Parse(frame, time.Now(), s.cfg.Location, m)
		m.Truncated = trunc
		if m.Host == "" {
			m.Host = peer
		}
		// Submit when the batch is full or nothing more is waiting, so a
		// lone message is not held back for company.
		if len(batch) == s.cfg.BatchSize || fr.Buffered() == 0 {
			if !s.submit(sctx, transport, batch) {
				return ReasonStoreError
			}
			clear(batch) // drop the frames' copies
			batch = batch[:0]
			if fr.Buffered() == 0 && cap(batch) > 16 {
				batch = nil
			}
		}
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
