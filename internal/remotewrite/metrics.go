package remotewrite

import "github.com/prometheus/client_golang/prometheus"

// Metrics of the destinations, labelled destination=NAME; the status
// endpoint serves the same counters.
var (
	descShards      = prometheus.NewDesc("vigil_remote_write_shards", "Remote-write senders sending now, between min_shards and max_shards.", []string{"destination"}, nil)
	descReshards    = prometheus.NewDesc("vigil_remote_write_reshards_total", "Changes of the remote-write shard count.", []string{"destination"}, nil)
	descQueued      = prometheus.NewDesc("vigil_remote_write_queue_samples", "Samples waiting to be sent.", []string{"destination"}, nil)
	descCapacity    = prometheus.NewDesc("vigil_remote_write_queue_capacity_samples", "Bound of the samples waiting (queue_capacity).", []string{"destination"}, nil)
	descEnqueued    = prometheus.NewDesc("vigil_remote_write_samples_enqueued_total", "Samples queued for the destination.", []string{"destination"}, nil)
	descSent        = prometheus.NewDesc("vigil_remote_write_samples_sent_total", "Samples the destination accepted.", []string{"destination"}, nil)
	descDropped     = prometheus.NewDesc("vigil_remote_write_samples_dropped_total", "Samples not delivered, by reason: queue_full (oldest dropped), rejected (4xx), shutdown.", []string{"destination", "reason"}, nil)
	descRequests    = prometheus.NewDesc("vigil_remote_write_requests_total", "Remote-write requests sent, retries included.", []string{"destination"}, nil)
	descFailed      = prometheus.NewDesc("vigil_remote_write_requests_failed_total", "Remote-write requests that failed (network, 4xx, 5xx).", []string{"destination"}, nil)
	descDeferred    = prometheus.NewDesc("vigil_remote_write_samples_deferred_total", "Samples not queued (queue full, or their series behind) but left in the store for the backfill to read back.", []string{"destination"}, nil)
	descBackfilled  = prometheus.NewDesc("vigil_remote_write_samples_backfilled_total", "Samples the backfill read back from the store and queued.", []string{"destination"}, nil)
	descBehind      = prometheus.NewDesc("vigil_remote_write_backfill_series", "Series behind: their samples wait in the store for the backfill.", []string{"destination"}, nil)
	descBackfillErr = prometheus.NewDesc("vigil_remote_write_backfill_errors_total", "Backfill rounds that failed to read the store.", []string{"destination"}, nil)
	descBusySeconds = prometheus.NewDesc("vigil_remote_write_send_seconds_total", "Time the shards spent waiting on requests; its rate is the average number of busy shards.", []string{"destination"}, nil)
)

// Describe implements prometheus.Collector.
func (w *Writer) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShards, descReshards, descQueued, descCapacity, descEnqueued, descSent,
		descDropped, descRequests, descFailed, descBusySeconds, descDeferred, descBackfilled, descBehind, descBackfillErr} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (w *Writer) Collect(ch chan<- prometheus.Metric) {
	for _, q := range w.queues {
		st := q.status()
		n := st.Name
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, n)
		}
		c := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), n)
		}
		g(descShards, float64(st.Shards))
		c(descReshards, st.Reshards)
		g(descQueued, float64(st.QueueLength))
		g(descCapacity, float64(st.QueueCapacity))
		c(descEnqueued, st.Enqueued)
		c(descSent, st.Sent)
		for _, r := range []struct {
			reason string
			v      uint64
		}{{"queue_full", st.DroppedFull}, {"rejected", st.DroppedRejected}, {"shutdown", st.DroppedShutdown}} {
			ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(r.v), n, r.reason)
		}
		c(descRequests, st.Requests)
		c(descFailed, st.FailedRequests)
		c(descDeferred, st.Deferred)
		c(descBackfilled, st.Backfilled)
		g(descBehind, float64(st.BackfillSeries))
		c(descBackfillErr, st.BackfillErrors)
		ch <- prometheus.MustNewConstMetric(descBusySeconds, prometheus.CounterValue, float64(q.stats.busyNanos.Load())/1e9, n)
	}
}
