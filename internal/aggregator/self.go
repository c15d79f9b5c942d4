package aggregator

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vigil-hpc/vigil/internal/httpsec"
	"github.com/vigil-hpc/vigil/internal/metric"
)

type selfDescs struct {
	info, childrenUp, childrenDown, connections, received, forwarded, dropped,
	ticksDropped, gaps, bytesIn, bytesOut, upstreamUp, lag, protoErrs, authFails, refused, buffer, bufferCap *metric.Desc
	ioRecords, ioDropped *metric.Desc
}

func newSelfDescs(name string) selfDescs {
	l := []string{"aggregator", name}
	g := func(n, h string) *metric.Desc { return metric.NewDesc(n, h, metric.Gauge, l...) }
	c := func(n, h string) *metric.Desc { return metric.NewDesc(n, h, metric.Counter, l...) }
	return selfDescs{
		childrenUp:   g("vigil_aggregator_children_up", "Children (nodes) currently sending."),
		childrenDown: g("vigil_aggregator_children_down", "Children known or expected but silent for 3 intervals."),
		connections:  g("vigil_aggregator_connections", "Open child connections."),
		received:     c("vigil_aggregator_values_received_total", "Values received from children."),
		forwarded:    c("vigil_aggregator_values_forwarded_total", "Values queued for the upstream."),
		dropped:      c("vigil_aggregator_values_dropped_total", "Values dropped because the upstream buffer was full."),
		ticksDropped: c("vigil_aggregator_upstream_ticks_dropped_total", "Ticks the upstream client lost (buffer full or connection lost); recorded as gaps."),
		gaps:         c("vigil_aggregator_gaps_received_total", "Gap records received from lower tiers."),
		bytesIn:      c("vigil_aggregator_bytes_received_total", "Wire bytes received from children."),
		bytesOut:     c("vigil_aggregator_bytes_sent_total", "Wire bytes sent upstream."),
		upstreamUp:   g("vigil_aggregator_upstream_connected", "1 if connected to an upstream."),
		lag:          g("vigil_aggregator_lag_seconds", "Largest delay from sample timestamp to arrival here over the last interval."),
		protoErrs:    c("vigil_aggregator_protocol_errors_total", "Connections closed for malformed, oversized or unknown frames."),
		authFails:    c("vigil_aggregator_auth_failures_total", "Peers refused for failed authentication."),
		refused:      c("vigil_aggregator_refused_total", "Connections refused on accepting: a connection cap reached, or a non-loopback peer while no key is set."),
		buffer:       g("vigil_aggregator_buffer_bytes", "Encoded bytes waiting for the upstream (grows while it is away)."),
		bufferCap:    g("vigil_aggregator_buffer_capacity_bytes", "Bound of vigil_aggregator_buffer_bytes (buffer_bytes); beyond it ticks are dropped."),
		ioRecords:    c("vigil_aggregator_io_records_forwarded_total", "Per-file I/O records queued for the upstream."),
		ioDropped:    c("vigil_aggregator_io_records_dropped_total", "Per-file I/O records dropped: more than a quarter of buffer_bytes waited for the upstream."),
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// fillSelf writes the aggregator's health into b.
func (a *Aggregator) fillSelf(b *metric.Batch, t time.Time) {
	d := &a.selfDescs
	if d.info == nil {
		d.info = metric.NewDesc("vigil_aggregator_info", "Aggregator identity and position in the tree.", metric.Gauge,
			"aggregator", a.cfg.Name, "listen", a.Addr(), "upstream", joinAddrs(a.cfg.Upstream))
	}
	up, down := a.live.Counts()
	cs := a.client.Stats()
	b.Reset(t)
	b.Add(d.info, 1)
	b.Add(d.childrenUp, float64(up))
	b.Add(d.childrenDown, float64(down))
	b.Add(d.connections, float64(a.wstats.Active.Load()))
	b.Add(d.received, float64(a.received.Load()))
	b.Add(d.forwarded, float64(a.forwarded.Load()))
	b.Add(d.dropped, float64(a.dropped.Load()))
	b.Add(d.ticksDropped, float64(cs.Dropped.Load()))
	b.Add(d.ioRecords, float64(cs.IORecords.Load()))
	b.Add(d.ioDropped, float64(cs.DroppedIORecords.Load()))
	b.Add(d.gaps, float64(a.gaps.Load()))
	b.Add(d.bytesIn, float64(a.wstats.Bytes.Load()))
	b.Add(d.bytesOut, float64(cs.Bytes.Load()))
	b.Add(d.upstreamUp, b2f(cs.Connected.Load()))
	b.Add(d.lag, float64(a.lastLag.Load())/1e9)
	b.Add(d.protoErrs, float64(a.wstats.ProtocolErrors.Load()))
	b.Add(d.authFails, float64(a.wstats.AuthFailures.Load()))
	b.Add(d.refused, float64(a.wstats.Refused.Load()+a.wstats.RejectedConns.Load()+a.wstats.RejectedSource.Load()+
		a.wstats.RejectedHandshakes.Load()+a.wstats.RejectedSourceHandshakes.Load()))
	b.Add(d.buffer, float64(a.client.QueueBytes()))
	b.Add(d.bufferCap, float64(a.cfg.BufferBytes))
}

func joinAddrs(a []string) string {
	s := ""
	for i, x := range a {
		if i > 0 {
			s += ","
		}
		s += x
	}
	return s
}

// sendSelf streams the aggregator's own health as the node named after it.
func (a *Aggregator) sendSelf(t time.Time) {
	a.selfMu.Lock()
	defer a.selfMu.Unlock()
	a.fillSelf(&a.selfBatch, t)
	a.client.Tick(a.self, t, a.selfBatch.Descs, a.selfBatch.Values)
}

// selfCollector exposes the health the aggregator streams upstream
// (vigil_aggregator_*, same names and labels plus node) on its registry.
// It is unchecked: vigil_aggregator_info's labels follow the bound address.
type selfCollector struct {
	a     *Aggregator
	mu    sync.Mutex
	b     metric.Batch
	descs map[*metric.Desc]*prometheus.Desc
}

func (c *selfCollector) Describe(chan<- *prometheus.Desc) {}

func (c *selfCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.a.selfMu.Lock()
	c.a.fillSelf(&c.b, time.Now())
	c.a.selfMu.Unlock()
	for i, d := range c.b.Descs {
		pd := c.descs[d]
		if pd == nil {
			l := prometheus.Labels{"node": c.a.cfg.Name}
			for _, x := range d.Labels {
				l[x.Name] = x.Value
			}
			pd = prometheus.NewDesc(d.Name, d.Help, nil, l)
			c.descs[d] = pd
		}
		vt := prometheus.GaugeValue
		switch d.Type {
		case metric.Counter:
			vt = prometheus.CounterValue
		case metric.Untyped:
			vt = prometheus.UntypedValue
		}
		ch <- prometheus.MustNewConstMetric(pd, vt, c.b.Values[i])
	}
}

// Registry holds the aggregator's own metrics, served on /metrics.
func (a *Aggregator) Registry() *prometheus.Registry { return a.reg }

// Handler serves /metrics (the aggregator's health, Go and process
// metrics) and /api/tree (its children's state as JSON).
func (a *Aggregator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn), MaxRequestsInFlight: 4,
	}))
	mux.HandleFunc("GET /api/tree", func(w http.ResponseWriter, r *http.Request) {
		nodes := a.live.Snapshot()
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node < nodes[j].Node })
		up, down := a.live.Counts()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"name": a.cfg.Name, "listen": a.Addr(), "upstream": a.cfg.Upstream,
			"upstream_connected": a.client.Stats().Connected.Load(),
			"children_up":        up, "children_down": down, "children": nodes,
		})
	})
	if a.cfg.DebugPprof {
		httpsec.RegisterPprof(mux)
	}
	return a.httpm.Instrument(mux)
}
