package relp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/internal/logs/syslog"
)

// Config configures a Server.
type Config struct {
	Addr      string
	MaxFrame  int            // largest message; longer ones are cut; syslog.DefaultMaxFrame when 0
	Limits    syslog.Limits  // connections, idle and frame timeouts
	Location  *time.Location // zone of RFC 3164 timestamps; time.Local when nil
	BatchSize int            // messages per Submit; 1024 when 0
	Metrics   *syslog.Metrics
	// Dedup, when set, holds the messages stored over RELP so that resent
	// ones are acknowledged without being stored again.
	Dedup *Dedup
}

// writeTimeout bounds a write of acknowledgements to a peer that does not
// read them.
const writeTimeout = 30 * time.Second

// shutdownGrace is how long sessions may take to commit, acknowledge and
// say goodbye once shutdown begins.
const shutdownGrace = 5 * time.Second

// Server is a RELP listener feeding a syslog.Sink.
type Server struct {
	cfg   Config
	sink  syslog.Sink
	log   *slog.Logger
	m     *syslog.Metrics
	notes *syslog.Notes
	set   *syslog.ConnSet
	ln    net.Listener
	stop  atomic.Bool
}

// NewServer returns a server; Listen binds it.
func NewServer(cfg Config, sink syslog.Sink, log *slog.Logger) *Server {
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = syslog.DefaultMaxFrame
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1024
	}
	if cfg.Metrics == nil {
		cfg.Metrics = syslog.NewMetrics(nil)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	notes := syslog.NewNotes(log)
	return &Server{cfg: cfg, sink: sink, log: log, m: cfg.Metrics, notes: notes,
		set: syslog.NewConnSet(syslog.TransportRELP, cfg.Limits, cfg.Metrics, notes, log)}
}

// Listen binds the address.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("relp: listen %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	return nil
}

// Close closes the listener of a server that never ran; Run closes it
// itself.
func (s *Server) Close() {
	if s.ln != nil {
		s.ln.Close()
	}
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until ctx is done. Then sessions commit and acknowledge what
// they have read, send serverclose and end, within a grace period.
func (s *Server) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.set.Serve(ctx, s.ln, &wg, func(c net.Conn) string { return s.serveConn(ctx, c) })
	}()
	<-ctx.Done()
	s.ln.Close()
	s.stop.Store(true)
	s.set.Interrupt()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
		s.set.CloseAll()
		<-done
	}
	s.set.CloseAll()
	return nil
}

// session is the state of one connection.
type session struct {
	s       *Server
	c       net.Conn
	peer    string
	opened  bool
	expect  uint32 // next transaction number
	batch   []syslog.Message
	keys    []uint64 // Dedup keys of batch
	acks    []uint32 // transaction numbers to acknowledge after the commit
	resend  bool     // still in the prefix of resent messages
	matched map[uint64]int
	out     []byte
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) string {
	lim := s.set.Limits()
	ss := &session{s: s, c: c, expect: 1, resend: s.cfg.Dedup != nil}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ss.peer = a.AddrPort().Addr().Unmap().String()
	}
	rd := newReader(c, s.cfg.MaxFrame, lim.IdleTimeout, lim.FrameTimeout, &s.stop)
	// Messages read are committed even once shutdown began.
	sctx := context.WithoutCancel(ctx)
	for {
		h, data, cut, err := rd.next()
		if err != nil {
			// Commit what was read: if the peer is gone it resends, and
			// the resend is recognised as a duplicate.
			if ferr := ss.flush(sctx); ferr != nil {
				return syslog.ReasonStoreError
			}
			if s.stop.Load() {
				ss.write(AppendFrame(nil, 0, "serverclose", nil))
				return ""
			}
			if errors.Is(err, ErrFrame) {
				s.m.Rejected.WithLabelValues(syslog.TransportRELP, syslog.ReasonProtocol).Inc()
				s.notes.Warn("relp protocol", "relp session ended: protocol error", "peer", c.RemoteAddr().String(), "err", err)
				return syslog.ReasonProtocol
			}
			if r := syslog.CloseReason(err, rd.partial()); r != "" {
				return r
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("relp session ended", "peer", c.RemoteAddr().String(), "err", err)
			}
			return ""
		}
		if h.Txnr != ss.expect {
			ss.flush(sctx)
			s.m.Rejected.WithLabelValues(syslog.TransportRELP, syslog.ReasonProtocol).Inc()
			s.notes.Warn("relp txnr", "relp session ended: transaction number out of sequence",
				"peer", c.RemoteAddr().String(), "txnr", h.Txnr, "want", ss.expect)
			ss.rsp(h.Txnr, "500 invalid transaction number")
			return syslog.ReasonProtocol
		}
		ss.expect = nextTxnr(ss.expect)
		switch h.Cmd {
		case "syslog":
			if !ss.opened {
				s.m.Rejected.WithLabelValues(syslog.TransportRELP, syslog.ReasonProtocol).Inc()
				ss.rsp(h.Txnr, "500 session not open")
				return syslog.ReasonProtocol
			}
			ss.add(h.Txnr, data, cut)
		case "open":
			if err := ss.open(h.Txnr, data); err != nil {
				s.m.Rejected.WithLabelValues(syslog.TransportRELP, syslog.ReasonProtocol).Inc()
				s.notes.Warn("relp open", "relp session refused", "peer", c.RemoteAddr().String(), "err", err)
				return syslog.ReasonProtocol
			}
		case "close":
			if err := ss.flush(sctx); err != nil {
				return syslog.ReasonStoreError
			}
			ss.rsp(h.Txnr, "")
			return ""
		default:
			ss.flush(sctx)
			ss.rsp(h.Txnr, "500 command not supported")
			continue
		}
		if len(ss.batch) >= s.cfg.BatchSize || rd.buffered() == 0 {
			if err := ss.flush(sctx); err != nil {
				return syslog.ReasonStoreError
			}
		}
	}
}

// open answers the client's offers: the session needs the syslog command.
func (ss *session) open(txnr uint32, offers []byte) error {
	if ss.opened {
		ss.rsp(txnr, "200 connection already open - ignored")
		return nil
	}
	syslogCmd := false
	for line := range bytes.SplitSeq(offers, []byte("\n")) {
		name, value, _ := bytes.Cut(line, []byte("="))
		if string(name) != "commands" {
			continue
		}
		for v := range bytes.SplitSeq(value, []byte(",")) {
			if string(bytes.TrimSpace(v)) == "syslog" {
				syslogCmd = true
			}
		}
	}
	if !syslogCmd {
		ss.rsp(txnr, "500 required command not supported by client")
		return errors.New("client does not offer the syslog command")
	}
	ss.opened = true
	return ss.rsp(txnr, "200 OK\nrelp_version=0\nrelp_software=vigil\ncommands=syslog")
}

// add parses a syslog frame into the batch, or only queues its
// acknowledgement when it is a resend of a stored message.
func (ss *session) add(txnr uint32, data []byte, cut bool) {
	s := ss.s
	ss.batch = append(ss.batch, syslog.Message{})
	m := &ss.batch[len(ss.batch)-1]
	syslog.Parse(data, time.Now(), s.cfg.Location, m)
	m.Truncated = cut
	m.Reliable = true
	if m.Host == "" {
		m.Host = ss.peer
	}
	var k uint64
	if d := s.cfg.Dedup; d != nil {
		k = d.Key(m)
		if ss.resend {
			if ss.matched == nil {
				ss.matched = map[uint64]int{}
			}
			if ss.matched[k] < d.Count(k) {
				ss.matched[k]++
				ss.batch = ss.batch[:len(ss.batch)-1]
				ss.acks = append(ss.acks, txnr)
				s.m.Dropped.WithLabelValues(syslog.TransportRELP, syslog.ReasonDuplicate).Inc()
				return
			}
			ss.resend, ss.matched = false, nil
		}
	}
	ss.keys = append(ss.keys, k)
	ss.acks = append(ss.acks, txnr)
}

// flush commits the batch and then acknowledges it (and the duplicates
// among it). On a store error nothing is acknowledged: the sender keeps
// the messages and resends them.
func (ss *session) flush(ctx context.Context) error {
	s := ss.s
	if n := len(ss.batch); n > 0 {
		var mal, trunc int
		for i := range ss.batch {
			if ss.batch[i].Malformed {
				mal++
			}
			if ss.batch[i].Truncated {
				trunc++
			}
		}
		if err := s.sink.Submit(ctx, ss.batch); err != nil {
			s.m.Dropped.WithLabelValues(syslog.TransportRELP, syslog.ReasonStoreError).Add(float64(n))
			s.notes.Warn("relp store", "store refused messages; the sender keeps them", "err", err, "messages", n)
			ss.acks = ss.acks[:0]
			return err
		}
		s.m.Received.WithLabelValues(syslog.TransportRELP).Add(float64(n))
		s.m.Malformed.WithLabelValues(syslog.TransportRELP).Add(float64(mal))
		s.m.Truncated.WithLabelValues(syslog.TransportRELP).Add(float64(trunc))
		if d := s.cfg.Dedup; d != nil {
			for _, k := range ss.keys {
				d.Add(k)
			}
		}
		clear(ss.batch) // drop the frames' copies
		ss.batch, ss.keys = ss.batch[:0], ss.keys[:0]
		if cap(ss.batch) > 16 {
			ss.batch, ss.keys = nil, nil
		}
	}
	if len(ss.acks) == 0 {
		return nil
	}
	out := ss.out[:0]
	for _, t := range ss.acks {
		out = AppendFrame(out, t, "rsp", []byte("200 OK"))
	}
	ss.acks = ss.acks[:0]
	ss.out = out
	// A peer that is gone resends; the store has the messages.
	ss.write(out)
	return nil
}

func (ss *session) rsp(txnr uint32, text string) error {
	return ss.write(AppendFrame(ss.out[:0], txnr, "rsp", []byte(text)))
}

func (ss *session) write(b []byte) error {
	_ = ss.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := ss.c.Write(b)
	return err
}
