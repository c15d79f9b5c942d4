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

	mu    sync.Mutex
	conns map[net.Conn]struct{}
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
	return &Server{cfg: cfg, sink: sink, log: log, conns: map[net.Conn]struct{}{}}
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
		// A larger socket buffer absorbs bursts while the queue drains.
		_ = s.udp.SetReadBuffer(8 << 20)
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
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
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
	for _, ln := range []net.Listener{s.tcp, s.tlsLn} {
		if ln == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.accept(ctx, ln, &wg) }()
	}
	<-ctx.Done()
	s.Close()
	wg.Wait()
	return nil
}

func (s *Server) readUDP(q chan<- Message) {
	buf := make([]byte, s.cfg.MaxFrame)
	for {
		n, addr, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("udp read failed", "err", err)
			}
			return
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
		}
	}
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
		s.submit(sctx, batch)
	}
}

func (s *Server) submit(ctx context.Context, batch []Message) bool {
	for i := range batch {
		if batch[i].Malformed {
			s.stats.Malformed.Add(1)
		}
		if batch[i].Truncated {
			s.stats.Truncated.Add(1)
		}
	}
	if err := s.sink.Submit(ctx, batch); err != nil {
		s.stats.SinkErrors.Add(1)
		s.log.Warn("store refused messages", "err", err, "messages", len(batch))
		return false
	}
	s.stats.Received.Add(uint64(len(batch)))
	return true
}

func (s *Server) accept(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// Out of descriptors and the like: back off instead of spinning.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
			continue
		}
		delay = 0
		s.mu.Lock()
		if ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.stats.ConnsOpen.Add(1)
		s.stats.ConnsTotal.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
			s.stats.ConnsOpen.Add(-1)
		}()
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	peer := ""
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		peer = ta.AddrPort().Addr().Unmap().String()
	}
	log := s.log.With("peer", c.RemoteAddr().String())
	fr := NewFramer(c, s.cfg.MaxFrame)
	batch := make([]Message, 0, s.cfg.BatchSize)
	// Messages already read are submitted even after shutdown began.
	sctx := context.WithoutCancel(ctx)
	for {
		frame, trunc, err := fr.Next()
		if errors.Is(err, ErrRejected) {
			s.stats.Rejected.Add(1)
			log.Debug("frame rejected", "err", err)
			continue
		}
		if err != nil {
			if len(batch) > 0 {
				s.submit(sctx, batch)
			}
			if !errors.Is(err, net.ErrClosed) && !isEOF(err) {
				log.Debug("connection ended", "err", err)
			}
			return
		}
		batch = batch[:len(batch)+1]
		m := &batch[len(batch)-1]
		Parse(frame, time.Now(), s.cfg.Location, m)
		m.Truncated = trunc
		if m.Host == "" {
			m.Host = peer
		}
		// Submit when the batch is full or nothing more is waiting, so a
		// lone message is not held back for company.
		if len(batch) == cap(batch) || fr.Buffered() == 0 {
			if !s.submit(sctx, batch) {
				return
			}
			batch = batch[:0]
		}
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
