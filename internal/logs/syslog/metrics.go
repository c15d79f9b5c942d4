package syslog

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Transports, the "transport" label of the metrics.
const (
	TransportUDP  = "udp"
	TransportTCP  = "tcp"
	TransportTLS  = "tls"
	TransportRELP = "relp"
)

// Reasons, the "reason" label of the metrics.
const (
	ReasonQueueFull      = "queue_full"      // UDP: the queue to the store was full
	ReasonKernelOverflow = "kernel_overflow" // UDP: the socket buffer was full (SO_RXQ_OVFL)
	ReasonStoreError     = "store_error"     // the store refused the batch
	ReasonTooLarge       = "too_large"       // octet count or RELP frame above the maximum
	ReasonProtocol       = "protocol"        // RELP frame or command not valid
	ReasonDuplicate      = "duplicate"       // RELP resend of a message already stored
	ReasonMaxConns       = "max_conns"       // listener at its connection cap
	ReasonMaxConnsHost   = "max_conns_per_host"
	ReasonIdleTimeout    = "idle_timeout"
	ReasonFrameTimeout   = "frame_timeout"
)

// Metrics are the intake's self-metrics, shared by all listeners of a
// service (the RELP one included).
type Metrics struct {
	Received    *prometheus.CounterVec // transport
	Malformed   *prometheus.CounterVec // transport
	Truncated   *prometheus.CounterVec // transport
	Dropped     *prometheus.CounterVec // transport, reason: lost after being read
	Rejected    *prometheus.CounterVec // transport, reason: refused on arrival
	ConnsOpen   *prometheus.GaugeVec   // transport
	ConnsTotal  *prometheus.CounterVec // transport
	ConnsRefuse *prometheus.CounterVec // transport, reason
	ConnsClosed *prometheus.CounterVec // transport, reason: closed by us
}

// NewMetrics creates the metrics and registers them with reg unless reg
// is nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_received_total", Help: "Syslog messages stored, by transport.",
		}, []string{"transport"}),
		Malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_malformed_total", Help: "Syslog messages that followed neither RFC 3164 nor 5424, stored raw.",
		}, []string{"transport"}),
		Truncated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_truncated_total", Help: "Newline-framed syslog messages cut at the maximum frame size.",
		}, []string{"transport"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_dropped_total", Help: "Syslog messages lost after arrival, by transport and reason.",
		}, []string{"transport", "reason"}),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_rejected_total", Help: "Syslog frames refused, by transport and reason.",
		}, []string{"transport", "reason"}),
		ConnsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_syslog_connections", Help: "Syslog connections open.",
		}, []string{"transport"}),
		ConnsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_connections_total", Help: "Syslog connections accepted.",
		}, []string{"transport"}),
		ConnsRefuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_connections_refused_total", Help: "Syslog connections closed at once because of a connection cap.",
		}, []string{"transport", "reason"}),
		ConnsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_syslog_connections_closed_total", Help: "Syslog connections closed by the server (timeouts, protocol errors).",
		}, []string{"transport", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.Received, m.Malformed, m.Truncated, m.Dropped, m.Rejected,
			m.ConnsOpen, m.ConnsTotal, m.ConnsRefuse, m.ConnsClosed)
	}
	return m
}

// Notes logs a warning of a kind at its first occurrence and then at most
// once a minute with the number of occurrences in between, so that a
// flood of bad senders costs a counter, not a log line each.
type Notes struct {
	log *slog.Logger
	mu  sync.Mutex
	at  map[string]time.Time
	n   map[string]int
}

// NewNotes logs to log.
func NewNotes(log *slog.Logger) *Notes {
	return &Notes{log: log, at: map[string]time.Time{}, n: map[string]int{}}
}

// noteEvery is how often a repeated kind of event is logged again.
const noteEvery = time.Minute

// Warn logs msg unless a message of the same kind was logged in the last
// minute; then it only counts.
func (n *Notes) Warn(kind, msg string, args ...any) {
	now := time.Now()
	n.mu.Lock()
	last, seen := n.at[kind]
	if seen && now.Sub(last) < noteEvery {
		n.n[kind]++
		n.mu.Unlock()
		return
	}
	more := n.n[kind]
	n.at[kind] = now
	n.n[kind] = 0
	n.mu.Unlock()
	if more > 0 {
		args = append(args, "more_since_last_log", more)
	}
	n.log.Warn(msg, args...)
}
