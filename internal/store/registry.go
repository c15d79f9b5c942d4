package store

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// tsdbRegisterer returns the registerer for the TSDB about to be opened.
// The TSDB registers its prometheus_tsdb_* collectors when it opens and
// never unregisters them, and the store reopens its TSDB (after a failed
// write, or after dropping future samples), so each opening gets its own
// trackingRegisterer and the previous one's collectors are unregistered
// first: the metrics follow the open TSDB instead of a closed one, and the
// second registration does not panic. It is made even without
// Options.Registerer: commit reads the WAL's failure counter through it.
func (s *Store) tsdbRegisterer() prometheus.Registerer {
	s.tsdbRegMu.Lock()
	defer s.tsdbRegMu.Unlock()
	if s.tsdbReg != nil {
		s.tsdbReg.unregisterAll()
	}
	s.tsdbReg = &trackingRegisterer{r: s.opts.Registerer}
	return s.tsdbReg
}

// currentTSDBRegisterer is the registerer of the TSDB opened last.
func (s *Store) currentTSDBRegisterer() *trackingRegisterer {
	s.tsdbRegMu.Lock()
	defer s.tsdbRegMu.Unlock()
	return s.tsdbReg
}

// trackingRegisterer remembers what it registered (with r, when r is not
// nil) so that it can take it all back, and find the TSDB's own counters.
type trackingRegisterer struct {
	r  prometheus.Registerer
	mu sync.Mutex
	cs []prometheus.Collector
}

func (t *trackingRegisterer) Register(c prometheus.Collector) error {
	if t.r != nil {
		if err := t.r.Register(c); err != nil {
			return err
		}
	}
	t.mu.Lock()
	t.cs = append(t.cs, c)
	t.mu.Unlock()
	return nil
}

func (t *trackingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *trackingRegisterer) Unregister(c prometheus.Collector) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.cs {
		if x == c {
			t.cs = append(t.cs[:i], t.cs[i+1:]...)
			break
		}
	}
	return t.r != nil && t.r.Unregister(c)
}

func (t *trackingRegisterer) unregisterAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.r != nil {
		for _, c := range t.cs {
			t.r.Unregister(c)
		}
	}
	t.cs = nil
}

// walWriteFailureMetrics are the TSDB's counters of failed WAL and
// out-of-order WBL writes (tsdb/wlog).
var walWriteFailureMetrics = []string{
	`fqName: "prometheus_tsdb_wal_writes_failed_total"`,
	`fqName: "prometheus_tsdb_out_of_order_wbl_writes_failed_total"`,
}

// writeFailures returns a function that reads the sum of the TSDB's
// failed WAL and WBL writes, found among the collectors it registered.
func (t *trackingRegisterer) writeFailures() func() float64 {
	t.mu.Lock()
	var found []prometheus.Collector
	for _, c := range t.cs {
		descs := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(descs); close(descs) }()
		match := false
		for d := range descs {
			for _, name := range walWriteFailureMetrics {
				match = match || strings.Contains(d.String(), name)
			}
		}
		if match {
			found = append(found, c)
		}
	}
	t.mu.Unlock()
	return func() float64 {
		sum := 0.0
		for _, c := range found {
			ch := make(chan prometheus.Metric, 4) // a counter sends one
			c.Collect(ch)
			close(ch)
			for m := range ch {
				var d dto.Metric
				if m.Write(&d) == nil {
					sum += d.GetCounter().GetValue()
				}
			}
		}
		return sum
	}
}
