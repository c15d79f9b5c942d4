// Package remotewrite sends what the server ingests from the tree on to
// other systems with the Prometheus remote-write 1.0 protocol (snappy
// compressed prompb.WriteRequest). Each destination has a bounded queue;
// what does not fit stays in the store and is read back later, in order
// (backfill.go; without a store the oldest are dropped), split in partitions by series,
// and min_shards to max_shards concurrent senders (shards, as in
// Prometheus' queue manager) that batch, keep each series' samples in
// order, and retry with exponential backoff on network errors, 5xx and
// 429; other 4xx answers drop the batch. The shard count follows the
// measured send rate. Everything is counted, served as JSON by Handler and
// as metrics by Collect.
package remotewrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// DefaultMaxSeries bounds the cache of encoded label sets.
const DefaultMaxSeries = 1 << 20

// maxGaugeNames bounds the descriptors kept for AppendNodeGauge's names.
const maxGaugeNames = 64

// Store is what the ingest path writes to (ingest.Store).
type Store interface {
	AppendTick(node string, t time.Time, descs []*metric.Desc, values []float64, up bool) error
	SetUp(node string, t time.Time, up bool) error
	Gap(node string, from, to time.Time) error
}

// Writer fans samples out to the destinations' queues.
type Writer struct {
	queues []*queue
	log    *slog.Logger
	upDesc *metric.Desc
	// Job is the job label sent beside instance=NODE, as the store writes
	// them (empty: neither); set it before the first tick.
	Job string

	mu        sync.Mutex // guards series, nodes, cached, gauges, scratch and hashes
	seed      maphash.Seed
	series    map[seriesKey]series
	nodes     map[string]*nodeLabels  // the tick path's cache, by node
	cached    int                     // label sets in nodes
	gauges    map[string]*metric.Desc // stable descriptors of AppendNodeGauge's names
	maxSeries int
	scratch   []sample
	hashes    []uint64 // hashes[i] is scratch[i]'s series'

	skipped atomic.Uint64 // ticks not forwarded because the store refused them
}

// series is one series' encoded label set and its hash, which picks the
// series' partition of every queue. Both are computed once, when the
// series enters a cache, not per sample.
type series struct {
	labels []byte
	hash   uint64
}

func (w *Writer) newSeries(ls []byte) series {
	return series{labels: ls, hash: maphash.Bytes(w.seed, ls)}
}

// seriesKey identifies a series by node and descriptor pointer, which the
// ingest path keeps stable (metric.Desc's contract).
type seriesKey struct {
	node string
	desc *metric.Desc
}

// New returns a writer for the destinations; call Run to send.
func New(dests []Config, log *slog.Logger) (*Writer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{
		log:       log,
		upDesc:    metric.NewDesc("up", "", metric.Gauge),
		seed:      maphash.MakeSeed(),
		series:    map[seriesKey]series{},
		nodes:     map[string]*nodeLabels{},
		gauges:    map[string]*metric.Desc{},
		maxSeries: DefaultMaxSeries,
	}
	var errs []error
	for i := range dests {
		if err := dests[i].Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		q := newQueue(dests[i], log)
		// Names label the metrics, so they must differ.
		for k := 2; slices.ContainsFunc(w.queues, func(o *queue) bool { return o.cfg.Name == q.cfg.Name }); k++ {
			q.cfg.Name = fmt.Sprintf("%s#%d", dests[i].withDefaults().Name, k)
		}
		q.log = log.With("destination", q.cfg.Name)
		q.seed = w.seed
		w.queues = append(w.queues, q)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// Run sends until ctx ends, then flushes each queue for at most
// DefaultFlushTimeout. It returns nil.
func (w *Writer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, q := range w.queues {
		wg.Go(func() { q.run(ctx) })
	}
	wg.Wait()
	return nil
}

// Tap returns a Store that writes to next and forwards what next accepted.
func (w *Writer) Tap(next Store) Store { return &tap{next: next, w: w} }

type tap struct {
	next Store
	w    *Writer
}

// AppendTick forwards a tick only when the store took all of it: samples
// the store refused (out of order, duplicates) would make a Prometheus
// destination answer 400 and drop the whole batch with them.
func (t *tap) AppendTick(node string, ts time.Time, descs []*metric.Desc, values []float64, up bool) error {
	err := t.next.AppendTick(node, ts, descs, values, up)
	if err != nil {
		t.w.skipped.Add(1)
		return err
	}
	t.w.addTick(node, ts.UnixMilli(), descs, values, up)
	return nil
}

// SetUp forwards up{node}.
func (t *tap) SetUp(node string, ts time.Time, up bool) error {
	if err := t.next.SetUp(node, ts, up); err != nil {
		return err
	}
	v := 0.0
	if up {
		v = 1
	}
	t.w.add(node, ts.UnixMilli(), []*metric.Desc{t.w.upDesc}, []float64{v})
	return nil
}

// Gap is not forwarded: the stale markers it writes are the store's
// business, and destinations see the node's up=0 instead.
func (t *tap) Gap(node string, from, to time.Time) error { return t.next.Gap(node, from, to) }

// Retire passes an ended job's stale markers to the store when it takes
// them (store.Retire); they are not forwarded: the receiving Prometheus
// ends the series by its own staleness.
func (t *tap) Retire(node string, ts time.Time, label, val string) (int, error) {
	if r, ok := t.next.(interface {
		Retire(string, time.Time, string, string) (int, error)
	}); ok {
		return r.Retire(node, ts, label, val)
	}
	return 0, nil
}

// NodeGauges stores one value per node at one time in one commit
// (store.AppendNodeGauge): the ingest path's clock offsets and skew flags,
// which the store labels as the nodes' own series.
type NodeGauges interface {
	AppendNodeGauge(name string, t time.Time, nodes []string, values []float64) error
}

// TapNodeGauges returns a NodeGauges that writes to next and forwards what
// next accepted, so per-node series the server computes (not only what
// the nodes send) reach the destinations too.
func (w *Writer) TapNodeGauges(next NodeGauges) NodeGauges { return &gaugeTap{next: next, w: w} }

type gaugeTap struct {
	next NodeGauges
	w    *Writer
}

// AppendNodeGauge forwards only when the store took every value, as
// AppendTick does.
func (g *gaugeTap) AppendNodeGauge(name string, t time.Time, nodes []string, values []float64) error {
	if err := g.next.AppendNodeGauge(name, t, nodes, values); err != nil {
		return err
	}
	g.w.addNodeGauge(name, t.UnixMilli(), nodes, values)
	return nil
}

// Labeled is one series' samples as received with its own label set
// (remote write in), for forwarding.
type Labeled struct {
	Labels labels.Labels
	T      []int64
	V      []float64
}

// AddLabeled queues samples the store accepted from remote write in, so
// that what outside agents send reaches the destinations too.
func (w *Writer) AddLabeled(series []Labeled) {
	if len(w.queues) == 0 || len(series) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scratch, w.hashes = w.scratch[:0], w.hashes[:0]
	for _, s := range series {
		sr := w.newSeries(appendLabelSet(nil, s.Labels)) // shared by this series' samples only
		for i, t := range s.T {
			w.appendLocked(sr, t, s.V[i])
		}
	}
	w.pushLocked()
}

// seriesLocked returns the series of d on node, cached.
func (w *Writer) seriesLocked(node string, d *metric.Desc) series {
	k := seriesKey{node, d}
	sr, ok := w.series[k]
	if !ok {
		if len(w.series) >= w.maxSeries {
			// Descriptors of vanished nodes or re-interned schemas pile
			// up here; rebuilding the live ones is cheap.
			clear(w.series)
		}
		sr = w.newSeries(appendTargetLabels(nil, w.Job, node, d))
		w.series[k] = sr
	}
	return sr
}

// nodeLabels is one node's label sets in the order of its last tick's
// descriptors. A node's descriptors stay the same from tick to tick while
// its schema does, so a tick costs one map lookup and a comparison of
// pointers in order instead of a lookup in a map of every series per value,
// which (cache misses in a map of hundreds of thousands of entries) cost
// about as much as the store's own append.
type nodeLabels struct {
	descs  []*metric.Desc
	series []series // series[i] belongs to descs[i]; zero for unnamed ones
	byDesc map[*metric.Desc]series
}

// tickSeriesLocked returns the series of a tick's descriptors, in order;
// valid until the next call.
func (w *Writer) tickSeriesLocked(node string, descs []*metric.Desc) []series {
	nl := w.nodes[node]
	if nl != nil && slices.Equal(nl.descs, descs) {
		return nl.series
	}
	if w.cached >= w.maxSeries {
		// Vanished nodes and old schemas pile up; rebuilding is cheap.
		clear(w.nodes)
		w.cached = 0
		nl = nil
	}
	if nl == nil {
		nl = &nodeLabels{byDesc: map[*metric.Desc]series{}}
		w.nodes[node] = nl
	}
	nl.descs = append(nl.descs[:0], descs...)
	nl.series = nl.series[:0]
	for _, d := range descs {
		var sr series
		if d != nil && d.Name != "" {
			if sr = nl.byDesc[d]; sr.labels == nil {
				sr = w.newSeries(appendTargetLabels(nil, w.Job, node, d))
				nl.byDesc[d] = sr
				w.cached++
			}
		}
		nl.series = append(nl.series, sr)
	}
	return nl.series
}

// appendLocked adds one sample of sr to the scratch.
func (w *Writer) appendLocked(sr series, t int64, v float64) {
	w.scratch = append(w.scratch, sample{labels: sr.labels, t: t, v: v})
	w.hashes = append(w.hashes, sr.hash)
}

// add queues samples of a few series (up, server-side gauges) for every
// destination.
func (w *Writer) add(node string, t int64, descs []*metric.Desc, values []float64) {
	if len(w.queues) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scratch, w.hashes = w.scratch[:0], w.hashes[:0]
	for i, d := range descs {
		if d == nil || d.Name == "" {
			continue
		}
		w.appendLocked(w.seriesLocked(node, d), t, values[i])
	}
	w.pushLocked()
}

// addTick queues one tick and, if up, up{node}=1 after its values.
func (w *Writer) addTick(node string, t int64, descs []*metric.Desc, values []float64, up bool) {
	if len(w.queues) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scratch, w.hashes = w.scratch[:0], w.hashes[:0]
	for i, sr := range w.tickSeriesLocked(node, descs) {
		if sr.labels != nil {
			w.appendLocked(sr, t, values[i])
		}
	}
	if up {
		w.appendLocked(w.seriesLocked(node, w.upDesc), t, 1)
	}
	w.pushLocked()
}

// pushLocked queues w.scratch for every destination and empties it.
func (w *Writer) pushLocked() {
	for _, q := range w.queues {
		q.push(w.scratch, w.hashes)
	}
	clear(w.scratch) // drop references to label sets the cache may evict
	w.scratch, w.hashes = w.scratch[:0], w.hashes[:0]
}

// addNodeGauge queues name{node}=value for every node.
func (w *Writer) addNodeGauge(name string, t int64, nodes []string, values []float64) {
	if len(w.queues) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.gauges[name]
	if d == nil {
		if len(w.gauges) >= maxGaugeNames {
			clear(w.gauges) // names are the caller's constants; never reached
		}
		d = metric.NewDesc(name, "", metric.Gauge)
		w.gauges[name] = d
	}
	w.scratch, w.hashes = w.scratch[:0], w.hashes[:0]
	for i, n := range nodes {
		if n == "" {
			continue
		}
		w.appendLocked(w.seriesLocked(n, d), t, values[i])
	}
	w.pushLocked()
}

// Status is the state of all destinations.
type Status struct {
	SkippedTicks uint64              `json:"skipped_ticks"`
	Destinations []DestinationStatus `json:"destinations"`
}

// Status returns the counters.
func (w *Writer) Status() Status {
	st := Status{SkippedTicks: w.skipped.Load(), Destinations: make([]DestinationStatus, 0, len(w.queues))}
	for _, q := range w.queues {
		st.Destinations = append(st.Destinations, q.status())
	}
	return st
}

// Handler serves Status as JSON in the Prometheus API envelope
// (GET /api/v1/status/remote_write).
func (w *Writer) Handler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(struct {
			Status string `json:"status"`
			Data   Status `json:"data"`
		}{"success", w.Status()})
	})
}

func parseURL(s string) (*url.URL, error) { return url.Parse(s) }
