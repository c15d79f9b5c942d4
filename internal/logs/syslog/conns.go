package syslog

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of Limits.
const (
	DefaultMaxConns        = 4096
	DefaultMaxConnsPerHost = 64
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultFrameTimeout    = 30 * time.Second
)

// Limits bound what stream connections may hold. Zero fields take the
// defaults; a negative one disables that limit.
type Limits struct {
	MaxConns        int           // open connections per listener
	MaxConnsPerHost int           // open connections per listener from one source address
	IdleTimeout     time.Duration // close a connection silent this long between frames
	FrameTimeout    time.Duration // close a connection that does not finish a begun frame in this time
}

// WithDefaults fills in the zero fields and turns negative ones into 0
// (no limit).
func (l Limits) WithDefaults() Limits {
	pick := func(v, d int) int {
		if v == 0 {
			return d
		}
		return max(v, 0)
	}
	pickD := func(v, d time.Duration) time.Duration {
		if v == 0 {
			return d
		}
		return max(v, 0)
	}
	return Limits{
		MaxConns:        pick(l.MaxConns, DefaultMaxConns),
		MaxConnsPerHost: pick(l.MaxConnsPerHost, DefaultMaxConnsPerHost),
		IdleTimeout:     pickD(l.IdleTimeout, DefaultIdleTimeout),
		FrameTimeout:    pickD(l.FrameTimeout, DefaultFrameTimeout),
	}
}

// ConnSet accepts the connections of one listener within its Limits,
// keeps them for shutdown and counts them. The RELP listener uses it too.
type ConnSet struct {
	transport string
	lim       Limits
	m         *Metrics
	notes     *Notes
	log       *slog.Logger

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	hosts  map[netip.Addr]int
	closed bool
}

// NewConnSet returns a set for one listener; lim is taken with defaults.
func NewConnSet(transport string, lim Limits, m *Metrics, notes *Notes, log *slog.Logger) *ConnSet {
	return &ConnSet{transport: transport, lim: lim.WithDefaults(), m: m, notes: notes, log: log,
		conns: map[net.Conn]struct{}{}, hosts: map[netip.Addr]int{}}
}

// Limits returns the limits in force.
func (cs *ConnSet) Limits() Limits { return cs.lim }

// Serve accepts on ln until ctx is done or ln is closed and runs serve for
// each connection in a goroutine counted in wg. serve returns the reason
// it closed the connection, "" when the peer ended it.
func (cs *ConnSet) Serve(ctx context.Context, ln net.Listener, wg *sync.WaitGroup, serve func(net.Conn) (reason string)) {
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			// Out of descriptors and the like: back off instead of spinning.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			cs.notes.Warn(cs.transport+" accept", "accept failed", "transport", cs.transport, "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
			continue
		}
		delay = 0
		host := remoteAddr(c)
		if reason := cs.add(c, host); reason != "" {
			c.Close()
			if reason == reasonShutdown {
				return
			}
			cs.m.ConnsRefuse.WithLabelValues(cs.transport, reason).Inc()
			cs.notes.Warn(cs.transport+" "+reason, "connection refused: cap reached",
				"transport", cs.transport, "reason", reason, "peer", host.String(),
				"max_conns", cs.lim.MaxConns, "max_conns_per_host", cs.lim.MaxConnsPerHost)
			continue
		}
		cs.m.ConnsOpen.WithLabelValues(cs.transport).Inc()
		cs.m.ConnsTotal.WithLabelValues(cs.transport).Inc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			reason := serve(c)
			c.Close()
			cs.remove(c, host)
			cs.m.ConnsOpen.WithLabelValues(cs.transport).Dec()
			if reason != "" {
				cs.m.ConnsClosed.WithLabelValues(cs.transport, reason).Inc()
				cs.notes.Warn(cs.transport+" closed "+reason, "connection closed by the server",
					"transport", cs.transport, "reason", reason, "peer", host.String())
			}
		}()
	}
}

// add registers c unless a cap forbids it (then it returns the reason).
func (cs *ConnSet) add(c net.Conn, host netip.Addr) string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch {
	case cs.closed:
		return reasonShutdown
	case cs.lim.MaxConns > 0 && len(cs.conns) >= cs.lim.MaxConns:
		return ReasonMaxConns
	case cs.lim.MaxConnsPerHost > 0 && cs.hosts[host] >= cs.lim.MaxConnsPerHost:
		return ReasonMaxConnsHost
	}
	cs.conns[c] = struct{}{}
	cs.hosts[host]++
	return ""
}

func (cs *ConnSet) remove(c net.Conn, host netip.Addr) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.conns, c)
	if cs.hosts[host]--; cs.hosts[host] <= 0 {
		delete(cs.hosts, host)
	}
}

const reasonShutdown = "shutdown"

// Interrupt refuses new connections and makes the pending and next reads
// of the open ones fail at once with a timeout, so that their handlers
// can finish (acknowledge, say goodbye) before CloseAll.
func (cs *ConnSet) Interrupt() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for c := range cs.conns {
		_ = c.SetReadDeadline(time.Now())
	}
}

// CloseAll closes the open connections and refuses new ones.
func (cs *ConnSet) CloseAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for c := range cs.conns {
		c.Close()
	}
}

// remoteAddr is the peer's IP, the zero Addr when it has none.
func remoteAddr(c net.Conn) netip.Addr {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// CloseReason classifies a read error of a connection served with a
// Framer-like reader: a timeout is a frame timeout when part of a frame
// was buffered, an idle timeout otherwise; other errors are the peer's.
func CloseReason(err error, partial bool) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if partial {
			return ReasonFrameTimeout
		}
		return ReasonIdleTimeout
	}
	return ""
}
