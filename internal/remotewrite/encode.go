package remotewrite

import (
	"encoding/binary"
	"math"
	"sort"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Field tags of the remote-write 1.0 messages (prompb, types.proto and
// remote.proto): WriteRequest.timeseries = 1, TimeSeries.labels = 1,
// TimeSeries.samples = 2, Label.name = 1, Label.value = 2, Sample.value = 1
// (double), Sample.timestamp = 2 (int64 milliseconds). Hand-encoding these
// few fields lets a steady-state batch encode without allocating, which the
// gogo-generated Marshal cannot (it needs a prompb.WriteRequest built per
// batch).
const (
	tagTimeSeries  = 1<<3 | 2 // WriteRequest.timeseries, length-delimited
	tagLabel       = 1<<3 | 2 // TimeSeries.labels
	tagSample      = 2<<3 | 2 // TimeSeries.samples
	tagLabelName   = 1<<3 | 2
	tagLabelValue  = 2<<3 | 2
	tagSampleValue = 1<<3 | 1 // fixed 64-bit
	tagSampleTime  = 2 << 3   // varint (wire type 0)
)

// sample is one queued value. labels is the series' encoded label list,
// shared and never modified once built.
type sample struct {
	labels []byte
	t      int64
	v      float64
}

// appendLabels encodes the label set of one series as the repeated labels
// field of a TimeSeries: __name__=name, node=node and the descriptor's own
// labels, sorted by name as the protocol requires.
func appendLabels(dst []byte, node string, d *metric.Desc) []byte {
	return appendTargetLabels(dst, "", node, d)
}

// appendTargetLabels is appendLabels with the target labels job=job and
// instance=node too (none if job is empty), as the store labels the
// series (metric.SeriesLabels).
func appendTargetLabels(dst []byte, job, node string, d *metric.Desc) []byte {
	ls, _ := metric.SeriesLabels(make([]metric.Label, 0, len(d.Labels)+4), job, node, d)
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
	for _, l := range ls {
		dst = appendLabel(dst, l.Name, l.Value)
	}
	return dst
}

// appendLabelSet encodes a label set received with its samples (remote
// write in); labels.Labels is sorted already.
func appendLabelSet(dst []byte, lset labels.Labels) []byte {
	lset.Range(func(l labels.Label) { dst = appendLabel(dst, l.Name, l.Value) })
	return dst
}

func appendLabel(dst []byte, name, value string) []byte {
	n := 1 + uvarintLen(uint64(len(name))) + len(name) + 1 + uvarintLen(uint64(len(value))) + len(value)
	dst = append(dst, tagLabel)
	dst = binary.AppendUvarint(dst, uint64(n))
	dst = append(dst, tagLabelName)
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	dst = append(dst, name...)
	dst = append(dst, tagLabelValue)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	dst = append(dst, value...)
	return dst
}

// appendWriteRequest encodes samples as a WriteRequest with one TimeSeries
// per sample (as Prometheus' own sender does) and appends it to dst.
func appendWriteRequest(dst []byte, samples []sample) []byte {
	for i := range samples {
		s := &samples[i]
		sl := 1 + 8 + 1 + uvarintLen(uint64(s.t))
		tl := len(s.labels) + 1 + uvarintLen(uint64(sl)) + sl
		dst = append(dst, tagTimeSeries)
		dst = binary.AppendUvarint(dst, uint64(tl))
		dst = append(dst, s.labels...)
		dst = append(dst, tagSample)
		dst = binary.AppendUvarint(dst, uint64(sl))
		dst = append(dst, tagSampleValue)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s.v))
		dst = append(dst, tagSampleTime)
		dst = binary.AppendUvarint(dst, uint64(s.t))
	}
	return dst
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}
