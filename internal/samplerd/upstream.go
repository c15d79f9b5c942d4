package samplerd

import (
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// upstreamMetrics renders the upstream client's counters for /metrics at
// scrape time, so a node shows by itself whether its stream is connected
// and what it lost; nothing of it runs on the tick.
type upstreamMetrics struct {
	up *wire.Client
	b  metric.Batch
	connected, connects, dialFailures, ticks, dropped, droppedEvents,
	resent, bytes, buffer *metric.Desc
}

func newUpstreamMetrics(up *wire.Client) *upstreamMetrics {
	g := func(n, h string) *metric.Desc { return metric.NewDesc(n, h, metric.Gauge) }
	c := func(n, h string) *metric.Desc { return metric.NewDesc(n, h, metric.Counter) }
	return &upstreamMetrics{
		up:            up,
		connected:     g("vigil_sampler_upstream_connected", "1 if the stream to an upstream is connected."),
		connects:      c("vigil_sampler_upstream_connects_total", "Connections made to an upstream."),
		dialFailures:  c("vigil_sampler_upstream_dial_failures_total", "Failed attempts to connect to an upstream (dial or handshake)."),
		ticks:         c("vigil_sampler_upstream_ticks_total", "Ticks queued for the upstream."),
		dropped:       c("vigil_sampler_upstream_ticks_dropped_total", "Ticks lost: the queue full, or older than its bound when a connection was lost."),
		droppedEvents: c("vigil_sampler_upstream_events_dropped_total", "Gap and node-state records dropped from a queue that held nothing else to drop."),
		resent:        c("vigil_sampler_upstream_ticks_resent_total", "Ticks encoded again after a lost connection, for an upstream that may lack them."),
		bytes:         c("vigil_sampler_upstream_bytes_sent_total", "Bytes written to the upstream."),
		buffer:        g("vigil_sampler_upstream_buffer_bytes", "Encoded bytes waiting for the upstream (grows while it is away)."),
	}
}

// batch fills and returns the batch as of now; the caller serialises
// scrapes.
func (u *upstreamMetrics) batch() *metric.Batch {
	cs := u.up.Stats()
	u.b.Reset(time.Now())
	connected := 0.0
	if cs.Connected.Load() {
		connected = 1
	}
	u.b.Add(u.connected, connected)
	u.b.Add(u.connects, float64(cs.Connects.Load()))
	u.b.Add(u.dialFailures, float64(cs.DialFailures.Load()))
	u.b.Add(u.ticks, float64(cs.Ticks.Load()))
	u.b.Add(u.dropped, float64(cs.Dropped.Load()))
	u.b.Add(u.droppedEvents, float64(cs.DroppedEvents.Load()))
	u.b.Add(u.resent, float64(cs.Resent.Load()))
	u.b.Add(u.bytes, float64(cs.Bytes.Load()))
	u.b.Add(u.buffer, float64(u.up.QueueBytes()))
	return &u.b
}
