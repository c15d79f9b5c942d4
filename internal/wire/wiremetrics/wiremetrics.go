// Package wiremetrics exposes a wire listener's counters as vigil_wire_*
// metrics through a client_golang Registerer. It is apart from package wire
// so that the sampler, which links wire for its client, does not link
// client_golang.
package wiremetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// New returns the exporter for wire.ServerOptions.Metrics: while Serve
// runs, its counters are registered with reg. A nil reg gives nil (none).
func New(reg prometheus.Registerer) wire.StatsExporter {
	if reg == nil {
		return nil
	}
	return exporter{reg}
}

type exporter struct{ reg prometheus.Registerer }

func (e exporter) Export(st *wire.ServerStats) (func(), error) {
	c := newStatsCollector(st)
	if err := e.reg.Register(c); err != nil {
		return nil, err
	}
	return func() { e.reg.Unregister(c) }, nil
}

// statsCollector exposes a ServerStats as vigil_wire_* metrics, read at
// scrape time from the atomics Serve already keeps.
type statsCollector struct {
	st                                                                     *wire.ServerStats
	accepted, rejected, active, handshaking                                *prometheus.Desc
	authFailures, tooLarge, frameAuth, protocol, frames, values, badValues *prometheus.Desc
	bytes, acks, interned                                                  *prometheus.Desc
}

func newStatsCollector(st *wire.ServerStats) *statsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("vigil_wire_"+name, help, labels, nil)
	}
	return &statsCollector{
		st:           st,
		accepted:     d("connections_accepted_total", "Connections accepted into the handshake."),
		rejected:     d("connections_rejected_total", "Connections closed on accepting, by reason (a cap reached, or a non-loopback peer without a key).", "reason"),
		active:       d("connections", "Authenticated connections."),
		handshaking:  d("handshakes", "Connections in the handshake."),
		authFailures: d("auth_failures_total", "Handshakes that failed authentication."),
		tooLarge:     d("handshake_frames_too_large_total", "Connections closed for a frame above the pre-authentication limit (also in protocol errors)."),
		frameAuth:    d("frame_auth_failures_total", "Keyed connections closed for a frame with a wrong tag: forged, replayed or reordered (also in protocol errors)."),
		protocol:     d("protocol_errors_total", "Connections closed for a malformed, oversized or unknown frame, or a failed handshake."),
		frames:       d("frames_received_total", "Frames received after the handshake."),
		values:       d("values_received_total", "Values decoded."),
		badValues:    d("bad_value_frames_total", "Values frames whose codes did not decode: dropped, with their stream's frames up to its next keyframe (the connection is kept)."),
		bytes:        d("bytes_received_total", "Frame bytes received after the handshake."),
		interned:     d("interned_descriptors", "Series descriptors interned: one per distinct series the connections' stream tables hold (forgotten once none holds it)."),
		acks:         d("acks_sent_total", "Acknowledgements sent (batched: at most about one per connection and ack interval)."),
	}
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.accepted, c.rejected, c.active, c.handshaking, c.authFailures,
		c.tooLarge, c.frameAuth, c.protocol, c.frames, c.values, c.badValues, c.bytes, c.acks, c.interned} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.st
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.accepted, st.Accepted.Load())
	st.EachRejected(func(reason string, n uint64) { counter(c.rejected, n, reason) })
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(st.Active.Load()))
	ch <- prometheus.MustNewConstMetric(c.handshaking, prometheus.GaugeValue, float64(st.Handshaking.Load()))
	counter(c.authFailures, st.AuthFailures.Load())
	counter(c.tooLarge, st.HandshakeTooLarge.Load())
	counter(c.frameAuth, st.FrameAuthFailures.Load())
	counter(c.badValues, st.BadValueFrames.Load())
	ch <- prometheus.MustNewConstMetric(c.interned, prometheus.GaugeValue, float64(st.Interned()))
	counter(c.protocol, st.ProtocolErrors.Load())
	counter(c.frames, st.Frames.Load())
	counter(c.values, st.Values.Load())
	counter(c.bytes, st.Bytes.Load())
	counter(c.acks, st.Acks.Load())
}
