package fabric

import (
	"context"
	"fmt"
	"math"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
)

// The fabric answer needs, per port, the newest value of a few series and
// the growth of a few counters over the window. Evaluated as PromQL that
// was seven expressions over 13,000 ports, most of the time going to the
// engine's series selection, label matching and result vectors
// (docs/benchmarks.md, "Fabric view"); scanning each series' samples once
// gives the same values at a fraction of the cost.

// maxScanSeries bounds the series one selector may visit (a port has about
// a dozen series; a store with more is hostile or misconfigured).
const maxScanSeries = 16 * MaxPorts

// scanner reads series of one store at one instant.
type scanner struct {
	ctx      context.Context
	db       storage.Queryable
	now      int64 // ms
	lookback int64 // ms: an instant value is the newest in (t-lookback, t]
	it       chunkenc.Iterator
	series   int
}

// each calls fn for every series matching ms, with an iterator over its
// samples in (from, to].
func (s *scanner) each(from, to int64, fn func(lset labels.Labels, it chunkenc.Iterator) error, ms ...*labels.Matcher) error {
	q, err := s.db.Querier(from+1, to)
	if err != nil {
		return err
	}
	defer q.Close()
	set := q.Select(s.ctx, false, &storage.SelectHints{Start: from + 1, End: to, Func: "fabric"}, ms...)
	n := 0
	for set.Next() {
		if n++; n > maxScanSeries {
			return fmt.Errorf("more than %d series match %v", maxScanSeries, ms)
		}
		if n%1024 == 0 {
			if err := s.ctx.Err(); err != nil {
				return err
			}
		}
		ser := set.At()
		s.it = ser.Iterator(s.it)
		if err := fn(ser.Labels(), s.it); err != nil {
			return err
		}
		if err := s.it.Err(); err != nil {
			return fmt.Errorf("read %s: %w", ser.Labels(), err)
		}
	}
	s.series += n
	return set.Err()
}

// newest returns the last float sample in (t-lookback, t] of it, as an
// instant selector does: none when that sample is a stale marker.
func newest(it chunkenc.Iterator, t, lookback int64) (float64, bool) {
	var at [1]float64
	var ok [1]bool
	newestAt(it, []int64{t}, lookback, at[:], ok[:])
	return at[0], ok[0]
}

// newestAt is newest for several ascending instants ts in one pass over
// the samples: vs[i], oks[i] are the value at ts[i].
func newestAt(it chunkenc.Iterator, ts []int64, lookback int64, vs []float64, oks []bool) {
	i := 0
	for vt := it.Seek(ts[0] - lookback + 1); vt != chunkenc.ValNone && i < len(ts); vt = it.Next() {
		if vt != chunkenc.ValFloat {
			continue
		}
		st, sv := it.At()
		for i < len(ts) && st > ts[i] {
			i++
		}
		for j := i; j < len(ts); j++ {
			if st > ts[j]-lookback {
				vs[j], oks[j] = sv, !value.IsStaleNaN(sv)
			}
		}
	}
}

// counterRate is a counter's average rate per second between its first
// and last samples in the iterator's range, resets counted as restarts
// from zero; ok needs two samples. PromQL's rate() extrapolates the same
// growth to the window's edges; at the sweep's 1 Hz over a minute the two
// differ by about a sample interval's share.
func counterRate(it chunkenc.Iterator) (float64, bool) {
	var (
		t0, t1     int64
		prev, incr float64
		n          int
	)
	for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
		if vt != chunkenc.ValFloat {
			continue
		}
		t, v := it.At()
		if value.IsStaleNaN(v) {
			continue
		}
		switch {
		case n == 0:
			t0 = t
		case v < prev:
			incr += v
		default:
			incr += v - prev
		}
		prev, t1 = v, t
		n++
	}
	if n < 2 || t1 <= t0 {
		return 0, false
	}
	return incr / (float64(t1-t0) / 1000), true
}

// portMax keeps, per port, the largest value seen (max by (switch_guid, port)).
type portMax map[portKey]float64

func (m portMax) add(l labels.Labels, v float64) {
	m.addKey(portKey{l.Get("switch_guid"), l.Get("port")}, v)
}

func (m portMax) addKey(k portKey, v float64) {
	if math.IsNaN(v) {
		return
	}
	if old, ok := m[k]; !ok || v > old {
		m[k] = v
	}
}
