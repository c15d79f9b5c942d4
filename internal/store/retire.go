package store

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/prometheus/prometheus/model/value"
)

// Retire ends the series of node whose descriptor carries label=val (the
// series of a job that ended on the node: jobid=ID) with a stale marker
// at t, as Prometheus marks the series a scrape no longer has, so queries
// stop showing them at once instead of for the 5-minute lookback. Their
// cached references are dropped, which releases the job's descriptors. It
// returns how many series it ended; series never appended are not cached
// and need no marker.
func (s *Store) Retire(node string, t time.Time, label, val string) (int, error) {
	if node == "" {
		return 0, errors.New("store: retire: empty node name")
	}
	ts := t.UnixMilli()
	if err := s.refuseFuture(node, ts, 1); err != nil {
		return 0, err
	}
	s.mu.Lock()
	nc := s.nodes[node]
	s.mu.Unlock()
	if nc == nil {
		return 0, nil
	}
	nc.mu.Lock()
	defer nc.mu.Unlock()
	var refs []*seriesRef
	dropped := 0
	for d, sr := range nc.series {
		for _, l := range d.Labels {
			if l.Name == label && l.Value == val {
				refs = append(refs, sr)
				if sr.twin != nil {
					refs = append(refs, sr.twin)
				}
				delete(nc.series, d)
				dropped++
				break
			}
		}
	}
	if len(refs) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	if s.nodes[node] == nc { // a swept node's entries were not counted
		s.cached -= dropped
	}
	s.mu.Unlock()
	app, g, err := s.begin(context.Background())
	if err != nil {
		return 0, err
	}
	stale := math.Float64frombits(value.StaleNaN)
	n := 0
	for _, sr := range refs {
		if _, err := app.Append(sr.ref, sr.lset, ts, stale); err != nil {
			if sampleRejected(err) || olderThanHead(err) {
				continue // the series already has a later sample
			}
			s.rollback(app, g)
			return 0, err
		}
		n++
	}
	return n, s.commit(app, g)
}
