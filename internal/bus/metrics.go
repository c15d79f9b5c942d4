package bus

import "github.com/prometheus/client_golang/prometheus"

// busMetrics are the vigil_bus_* self-metrics.
type busMetrics struct {
	published, confirmed, nacked, spooled, bytes *prometheus.CounterVec
	dropped                                      *prometheus.CounterVec
	spoolBytes, bufferFill, bufferCap            prometheus.Gauge
	connected, blocked                           prometheus.Gauge
	disconnects, connectErrors, confirmTimeouts  prometheus.Counter
	spoolErrors, writes                          prometheus.Counter
	latency                                      prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *busMetrics {
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vigil_bus_" + name, Help: help}, labels)
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_bus_" + name, Help: help})
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "vigil_bus_" + name, Help: help})
	}
	m := &busMetrics{
		published:       cv("published_total", "Messages published to the broker, by stream (a resend counts again).", "stream"),
		confirmed:       cv("confirmed_total", "Messages the broker confirmed: the ones counted as sent.", "stream"),
		nacked:          cv("nacked_total", "Messages the broker refused (basic.nack).", "stream"),
		spooled:         cv("spooled_total", "Messages written to the on-disk spool, by stream.", "stream"),
		bytes:           cv("published_bytes_total", "Bytes of message bodies published, by stream.", "stream"),
		dropped:         cv("dropped_total", "Messages lost, by stream and reason (buffer_full, spool_full, unconfirmed, nacked, too_large, spool_error); for logs, log messages.", "stream", "reason"),
		spoolBytes:      g("spool_bytes", "Bytes in the on-disk spool of logs, events and jobs."),
		bufferFill:      g("buffer_messages", "Metrics messages waiting in the memory buffer."),
		bufferCap:       g("buffer_capacity", "Size of the metrics memory buffer, in messages."),
		connected:       g("connected", "1 while connected to the broker."),
		blocked:         g("blocked", "1 while the broker blocks publishing (connection.blocked: memory or disk alarm)."),
		disconnects:     c("disconnects_total", "Connections to the broker lost or given up."),
		connectErrors:   c("connect_errors_total", "Failed attempts to connect to the broker."),
		confirmTimeouts: c("confirm_timeouts_total", "Connections dropped because the broker confirmed nothing in time."),
		spoolErrors:     c("spool_errors_total", "Failed reads, writes or syncs of the spool."),
		writes:          c("socket_writes_total", "Writes to the broker's socket (a batch of messages is one)."),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vigil_bus_confirm_seconds",
			Help: "Time from publishing a metrics message to its confirm.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.confirmed, m.nacked, m.spooled, m.bytes, m.dropped, m.spoolBytes, m.bufferFill, m.bufferCap,
			m.connected, m.blocked, m.disconnects, m.connectErrors, m.confirmTimeouts, m.spoolErrors, m.writes, m.latency)
	}
	return m
}

// streamCounters resolves a stream's labelled counters.
func (m *busMetrics) streamCounters(stream string) *streamCounters {
	return &streamCounters{
		published: m.published.WithLabelValues(stream), confirmed: m.confirmed.WithLabelValues(stream),
		nacked: m.nacked.WithLabelValues(stream), bytes: m.bytes.WithLabelValues(stream),
		unconfirmed: m.dropped.WithLabelValues(stream, "unconfirmed"), nackDropped: m.dropped.WithLabelValues(stream, "nacked"),
		full: m.dropped.WithLabelValues(stream, "buffer_full"),
	}
}
