package store

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// Ingest paths, as the limits and their metrics name them.
const (
	PathWire        = "wire"
	PathRemoteWrite = "remote_write"
)

// Defaults of SeriesLimits fields left zero.
const (
	// DefaultMaxSeriesPerNode: a 256-core node with every plugin makes a
	// few thousand series; tens of thousands of new ones are a bug or an
	// attack (a label with a value per tick).
	DefaultMaxSeriesPerNode = 20_000
	// DefaultMaxSeriesPerRemoteSender allows a Prometheus of modest size;
	// each series costs about 1.2 KB of memory in the head.
	DefaultMaxSeriesPerRemoteSender = 200_000
	// DefaultMaxHeadSeries bounds the head whoever sends (about 12 GB).
	DefaultMaxHeadSeries = 10_000_000
	// DefaultSeriesWindow is the TSDB's head block span: series idle that
	// long leave the head, so a sender's budget renews at that pace.
	DefaultSeriesWindow = 2 * time.Hour
	// maxSenders bounds the senders counted apart in one window; beyond
	// it new senders share one budget.
	maxSenders = 100_000
)

// SeriesLimits bound the series senders may create. A series that is in
// the head already is always accepted; only new ones count.
type SeriesLimits struct {
	// PerNode caps the new series one node (wire ingest, by node name)
	// creates per Window (0: DefaultMaxSeriesPerNode; negative: no cap).
	PerNode int
	// PerRemoteSender caps the new series one remote-write sender, by
	// remote IP address, creates per Window (0: default; negative: none).
	PerRemoteSender int
	// MaxHeadSeries refuses new series from anyone while the head holds
	// this many (0: DefaultMaxHeadSeries; negative: no cap).
	MaxHeadSeries int
	// Window is how often the per-sender budgets renew (0: 2h).
	Window time.Duration
	// Registerer gets vigil_series_refused_total; nil registers none.
	Registerer prometheus.Registerer
}

// SeriesLimitError is the refusal of a new series.
type SeriesLimitError struct {
	Path, Sender string
	Limit        int
	Window       time.Duration
	Head         bool // the global head cap, not the sender's
}

func (e *SeriesLimitError) Error() string {
	if e.Head {
		return fmt.Sprintf("series limit: the store holds %d series (max_head_series); new series refused", e.Limit)
	}
	key := "max_series_per_node"
	if e.Path == PathRemoteWrite {
		key = "max_series_per_remote_write_sender"
	}
	return fmt.Sprintf("series limit: %s sender %q created %d new series within %s (%s); new series refused",
		e.Path, e.Sender, e.Limit, e.Window, key)
}

// seriesLimiter counts the new series of each sender in the current window.
type seriesLimiter struct {
	o       SeriesLimits
	head    func() uint64
	log     *slog.Logger
	refused *prometheus.CounterVec

	mu          sync.Mutex
	windowStart time.Time
	created     map[sender]int
	logged      map[sender]bool // refusals logged this window
	headLogged  bool
}

type sender struct{ path, name string }

// LimitSeries makes the store refuse new series beyond l. Call it before
// appending; without it nothing is limited.
func (s *Store) LimitSeries(l SeriesLimits) {
	for _, v := range []struct {
		p   *int
		def int
	}{{&l.PerNode, DefaultMaxSeriesPerNode}, {&l.PerRemoteSender, DefaultMaxSeriesPerRemoteSender}, {&l.MaxHeadSeries, DefaultMaxHeadSeries}} {
		if *v.p == 0 {
			*v.p = v.def
		}
	}
	if l.Window <= 0 {
		l.Window = DefaultSeriesWindow
	}
	sl := &seriesLimiter{
		o: l, head: func() uint64 { return s.tdb().Head().NumSeries() }, log: s.log,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_series_refused_total",
			Help: "Samples of new series refused by the series limits, by ingest path and reason (sender or head).",
		}, []string{"path", "reason"}),
		windowStart: time.Now(), created: map[sender]int{}, logged: map[sender]bool{},
	}
	if l.Registerer != nil {
		l.Registerer.MustRegister(sl.refused)
	}
	s.limits = sl
}

// AdmitSeries reports, through app (an appender of this store), whether
// the sender may append to lset: a series in the head already, yes; a new
// one, while the sender and the head are under their caps. A refusal is
// counted, and logged once per sender and window.
func (s *Store) AdmitSeries(app storage.Appender, path, name string, lset labels.Labels) error {
	l := s.limits
	if l == nil {
		return nil
	}
	// up{node} is how liveness shows; a node over its budget keeps it.
	if path == PathWire && lset.Len() == 2 && lset.Get(labels.MetricName) == "up" {
		return nil
	}
	if g, ok := app.(storage.GetRef); ok {
		if ref, _ := g.GetRef(lset, lset.Hash()); ref != 0 {
			return nil
		}
	}
	limit := l.o.PerNode
	if path == PathRemoteWrite {
		limit = l.o.PerRemoteSender
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.windowStart) >= l.o.Window {
		l.windowStart, l.created, l.logged, l.headLogged = now, map[sender]int{}, map[sender]bool{}, false
	}
	if l.o.MaxHeadSeries > 0 && l.head() >= uint64(l.o.MaxHeadSeries) {
		l.refused.WithLabelValues(path, "head").Inc()
		err := &SeriesLimitError{Path: path, Sender: name, Limit: l.o.MaxHeadSeries, Head: true}
		if !l.headLogged {
			l.headLogged = true
			l.log.Warn("series limit reached", "err", err)
		}
		return err
	}
	k := sender{path, name}
	if _, ok := l.created[k]; !ok && len(l.created) >= maxSenders {
		k.name = "(other)"
	}
	if limit > 0 && l.created[k] >= limit {
		l.refused.WithLabelValues(path, "sender").Inc()
		err := &SeriesLimitError{Path: path, Sender: k.name, Limit: limit, Window: l.o.Window}
		if !l.logged[k] {
			l.logged[k] = true
			l.log.Warn("series limit reached", "err", err)
		}
		return err
	}
	l.created[k]++
	return nil
}

// GetRef lets AdmitSeries look series up through the store's appender
// wrappers (scaled, guarded, bounded).
func (a scaledAppender) GetRef(lset labels.Labels, hash uint64) (storage.SeriesRef, labels.Labels) {
	return getRef(a.Appender, lset, hash)
}

func (a guardedAppender) GetRef(lset labels.Labels, hash uint64) (storage.SeriesRef, labels.Labels) {
	return getRef(a.Appender, lset, hash)
}

func (a boundedAppender) GetRef(lset labels.Labels, hash uint64) (storage.SeriesRef, labels.Labels) {
	return getRef(a.Appender, lset, hash)
}

func getRef(app storage.Appender, lset labels.Labels, hash uint64) (storage.SeriesRef, labels.Labels) {
	if g, ok := app.(storage.GetRef); ok {
		return g.GetRef(lset, hash)
	}
	return 0, labels.EmptyLabels()
}
