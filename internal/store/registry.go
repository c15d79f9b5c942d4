package store

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// tsdbRegisterer returns the registerer for the TSDB about to be opened.
// The TSDB registers its prometheus_tsdb_* collectors when it opens and
// never unregisters them, and the store reopens its TSDB (after a failed
// write, or after dropping future samples), so each opening gets its own
// trackingRegisterer and the previous one's collectors are unregistered
// first: the metrics follow the open TSDB instead of a closed one, and the
// second registration does not panic.
func (s *Store) tsdbRegisterer() prometheus.Registerer {
	if s.opts.Registerer == nil {
		return nil
	}
	s.tsdbRegMu.Lock()
	defer s.tsdbRegMu.Unlock()
	if s.tsdbReg != nil {
		s.tsdbReg.unregisterAll()
	}
	s.tsdbReg = &trackingRegisterer{r: s.opts.Registerer}
	return s.tsdbReg
}

// trackingRegisterer remembers what it registered so that it can take it
// all back.
type trackingRegisterer struct {
	r  prometheus.Registerer
	mu sync.Mutex
	cs []prometheus.Collector
}

func (t *trackingRegisterer) Register(c prometheus.Collector) error {
	if err := t.r.Register(c); err != nil {
		return err
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
	return t.r.Unregister(c)
}

func (t *trackingRegisterer) unregisterAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.cs {
		t.r.Unregister(c)
	}
	t.cs = nil
}
