package aggregator

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// lagMetrics show where a tick's latency goes in the tree: each
// aggregator's lag at arrival and once written upstream (both against the
// tick's own timestamp, so a sender's and lower tiers' delays are
// included), and the time it waited in the upstream queue. Percentiles
// per hop in bench/treeload come from these. It also counts the ticks
// relayed (passed on as they came), those encoded again and those lost.
type lagMetrics struct {
	received, sent         prometheus.Observer
	wait                   prometheus.Histogram
	relayed, encoded, lost prometheus.Counter
}

// lagBuckets span 1 ms to 30 s in steps of about 24 %.
var lagBuckets = prometheus.ExponentialBucketsRange(0.001, 30, 48)

func newLagMetrics(reg prometheus.Registerer) lagMetrics {
	tl := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_aggregator_tick_lag_seconds",
		Help:    "Time from a tick's timestamp until it arrived here (point=received) or was written upstream (point=written).",
		Buckets: lagBuckets,
	}, []string{"point"})
	wait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "vigil_aggregator_upstream_wait_seconds",
		Help:    "Time a forwarded tick waited in the upstream queue before it was written.",
		Buckets: lagBuckets,
	})
	fwd := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vigil_aggregator_forwarded_ticks_total",
		Help: "Children's ticks by how they went upstream: relayed (the child's frame passed on as it is), encoded (decoded and encoded again) or lost (the upstream lacked the state the frame was coded against, until the child's next keyframe; recorded as a gap).",
	}, []string{"how"})
	if reg != nil {
		reg.MustRegister(tl, wait, fwd)
	}
	return lagMetrics{received: tl.WithLabelValues("received"), sent: tl.WithLabelValues("written"), wait: wait,
		relayed: fwd.WithLabelValues("relayed"), encoded: fwd.WithLabelValues("encoded"), lost: fwd.WithLabelValues("lost")}
}

// written is the upstream client's Written hook.
func (l lagMetrics) written(t, queued, now time.Time) {
	l.sent.Observe(now.Sub(t).Seconds())
	l.wait.Observe(now.Sub(queued).Seconds())
}
