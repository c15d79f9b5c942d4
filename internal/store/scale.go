package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
)

// Decimal scaling. Some node_exporter metrics are integers in disguise:
// kernel ticks divided by USER_HZ, milliseconds times 1/1000, load averages
// printed with two decimals. Gorilla's XOR coding shares few bits between
// consecutive decimal fractions (node_cpu_seconds_total: about 2 bytes a
// sample) but many between integers (0.85). So the store keeps those
// series as the integer and converts back on read, as VictoriaMetrics keeps
// every value as a decimal mantissa and exponent.
//
// The conversion is exact by construction: a value is stored scaled only if
// converting the stored integer back gives the very same float64 bits;
// anything else (a different USER_HZ, a value from some other exporter)
// goes as it is into a twin series carrying UnscaledLabel, which reads
// merge back under the series' own labels. Nothing outside this file sees
// either the integers or the twin label.

// formatFile marks a data directory whose scaled metrics are stored as
// integers. A directory with data but without it comes from a Vigil that
// stored every value as it is, and stays that way: reading its floats as
// integers would be off by a factor of 100 or 1000.
const (
	formatFile    = "vigil-format"
	formatDecimal = "decimal-scaling 1\n"
)

// dataFormat tells whether dir stores scaled metrics as integers, marking
// a new (empty) directory so.
func dataFormat(dir string, log *slog.Logger) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, formatFile))
	switch {
	case err == nil && string(b) == formatDecimal:
		return true, nil
	case err == nil:
		return false, fmt.Errorf("store: %s: unknown data format %q (written by a newer Vigil?)", filepath.Join(dir, formatFile), strings.TrimSpace(string(b)))
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("store: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("store: %w", err)
	}
	// The TSDB's own files say whether there is data: its WAL, head
	// chunks, or a block (a directory with meta.json). The data directory
	// also holds other things (logs, rollups).
	for _, e := range entries {
		_, metaErr := os.Stat(filepath.Join(dir, e.Name(), "meta.json"))
		if e.Name() == "wal" || e.Name() == "chunks_head" || e.IsDir() && metaErr == nil {
			log.Warn("data directory from an older Vigil: values stay stored as they are, without integer compression", "dir", dir)
			return false, nil
		}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, formatFile), []byte(formatDecimal), 0o666); err != nil {
		return false, fmt.Errorf("store: %w", err)
	}
	return true, nil
}

// UnscaledLabel marks the twin series holding the values of a scaled metric
// that were not exact multiples of its unit. Queries never show it.
const UnscaledLabel = "__vigil_unscaled__"

// decimal is how one metric's values relate to the stored integers.
type decimal struct {
	scale float64 // stored = value * scale
	div   bool    // value = stored / scale (else stored * inv), as the producer computes it
	inv   float64
}

func divide(scale float64) *decimal   { return &decimal{scale: scale, div: true} }
func multiply(scale float64) *decimal { return &decimal{scale: scale, inv: 1 / scale} }

// decimalScales lists the metrics stored as integers, each with the
// arithmetic its producer (our plugins, node_exporter) uses, so the round
// trip is exact for every value they produce.
var decimalScales = map[string]*decimal{
	"node_cpu_seconds_total":                      divide(100), // USER_HZ ticks
	"node_cpu_guest_seconds_total":                divide(100),
	"vigil_process_cpu_seconds_total":             divide(100),
	"node_load1":                                  divide(100), // two decimals in /proc/loadavg
	"node_load5":                                  divide(100),
	"node_load15":                                 divide(100),
	"node_disk_read_time_seconds_total":           multiply(1000), // milliseconds * (1/1000)
	"node_disk_write_time_seconds_total":          multiply(1000),
	"node_disk_io_time_seconds_total":             multiply(1000),
	"node_disk_io_time_weighted_seconds_total":    multiply(1000),
	"node_disk_discard_time_seconds_total":        multiply(1000),
	"node_disk_flush_requests_time_seconds_total": multiply(1000),
	"vigil_sampler_cpu_seconds_total":             divide(1e6), // microseconds (self plugin)
	"vigil_plugin_duration_seconds":               divide(1e6),
}

func (d *decimal) decode(j float64) float64 {
	if d.div {
		return j / d.scale
	}
	return j * d.inv
}

// encode returns the integer to store for v, or false if v is not exactly
// representable. Stale markers are kept as they are (decode passes them).
func (d *decimal) encode(v float64) (float64, bool) {
	if value.IsStaleNaN(v) {
		return v, true
	}
	j := math.Round(v * d.scale)
	if !(math.Abs(j) < 1<<53) || math.Float64bits(d.decode(j)) != math.Float64bits(v) {
		return 0, false
	}
	return j, true
}

// twinLabels returns lset with UnscaledLabel="1".
func twinLabels(lset labels.Labels) labels.Labels {
	return labels.NewBuilder(lset).Set(UnscaledLabel, "1").Labels()
}

// scaledAppender scales samples of decimalScales metrics on their way into
// the TSDB, for appenders that carry their own label sets (remote write).
type scaledAppender struct {
	storage.Appender
	s *Store
}

func (a scaledAppender) Append(ref storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	d := decimalScales[l.Get(labels.MetricName)]
	if d == nil {
		return a.Appender.Append(ref, l, t, v)
	}
	if j, ok := d.encode(v); ok {
		return a.Appender.Append(ref, l, t, j)
	}
	a.s.unscaled.Add(1)
	_, err := a.Appender.Append(0, twinLabels(l), t, v)
	return ref, err // the caller's reference stays the main series'
}

// scaledQuerier converts scaled series back on read and hides the twins.
type scaledQuerier struct{ storage.Querier }

// mayMatchScaled tells whether a selector can match a scaled metric; most
// queries name another metric and pass through untouched.
func mayMatchScaled(ms []*labels.Matcher) bool {
	for _, m := range ms {
		if m.Name != labels.MetricName {
			continue
		}
		if m.Type == labels.MatchEqual {
			return decimalScales[m.Value] != nil
		}
		for name := range decimalScales {
			if m.Matches(name) {
				return true
			}
		}
		return false
	}
	return true
}

func (q scaledQuerier) Select(ctx context.Context, sortSeries bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	if !mayMatchScaled(ms) {
		return q.Querier.Select(ctx, sortSeries, hints, ms...)
	}
	twins, _, err := q.Querier.LabelValues(ctx, UnscaledLabel, nil)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	if len(twins) == 0 {
		return scaledSet{q.Querier.Select(ctx, sortSeries, hints, ms...)}
	}
	// Rare: some values went to twins. Both selections are sorted, and
	// dropping a label all twins share keeps theirs sorted, so a streaming
	// merge puts each twin's samples back into its series.
	main := scaledSet{q.Querier.Select(ctx, true, hints, append(slices.Clip(ms), labels.MustNewMatcher(labels.MatchEqual, UnscaledLabel, ""))...)}
	twin := dropLabelSet{q.Querier.Select(ctx, true, hints, append(slices.Clip(ms), labels.MustNewMatcher(labels.MatchEqual, UnscaledLabel, "1"))...), UnscaledLabel}
	return storage.NewMergeSeriesSet([]storage.SeriesSet{main, twin}, 0, storage.ChainedSeriesMerge)
}

func (q scaledQuerier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if name == UnscaledLabel {
		return nil, nil, nil
	}
	return q.Querier.LabelValues(ctx, name, hints, ms...)
}

func (q scaledQuerier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	names, ws, err := q.Querier.LabelNames(ctx, hints, ms...)
	return slices.DeleteFunc(names, func(n string) bool { return n == UnscaledLabel }), ws, err
}

// scaledSet decodes the series of scaled metrics.
type scaledSet struct{ storage.SeriesSet }

func (s scaledSet) At() storage.Series {
	sr := s.SeriesSet.At()
	if d := decimalScales[sr.Labels().Get(labels.MetricName)]; d != nil {
		return scaledSeries{Series: sr, d: d}
	}
	return sr
}

type scaledSeries struct {
	storage.Series
	d *decimal
}

func (s scaledSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	if si, ok := it.(*scaledIterator); ok {
		si.Iterator, si.d = s.Series.Iterator(si.Iterator), s.d
		return si
	}
	return &scaledIterator{Iterator: s.Series.Iterator(it), d: s.d}
}

type scaledIterator struct {
	chunkenc.Iterator
	d *decimal
}

func (it *scaledIterator) At() (int64, float64) {
	t, v := it.Iterator.At()
	if value.IsStaleNaN(v) {
		return t, v
	}
	return t, it.d.decode(v)
}

// dropLabelSet presents series without one label that all of them carry
// with the same value (which keeps a sorted set sorted).
type dropLabelSet struct {
	storage.SeriesSet
	name string
}

func (s dropLabelSet) At() storage.Series {
	sr := s.SeriesSet.At()
	return strippedSeries{Series: sr, lset: labels.NewBuilder(sr.Labels()).Del(s.name).Labels()}
}
