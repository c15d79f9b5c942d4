// Package metric holds the in-memory form of one collection: a reusable
// batch of samples pointing at stable series descriptors.
package metric

import "time"

// Type is the Prometheus metric type of a series.
type Type uint8

const (
	Gauge Type = iota
	Counter
	// Untyped is used where node_exporter exposes untyped metrics (vmstat).
	Untyped
)

func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Untyped:
		return "untyped"
	}
	return "gauge"
}

// Label is one name/value pair.
type Label struct {
	Name, Value string
}

// Desc describes one series (without the node label, which is added by the
// daemon). Plugins create a Desc when a series first appears and reuse the
// same pointer on every later tick, so downstream code (wire encoder, text
// writer) can key caches on the pointer and a steady-state tick allocates
// nothing.
type Desc struct {
	Name   string
	Help   string
	Type   Type
	Labels []Label
}

// NewDesc returns a descriptor with labels given as name, value pairs.
func NewDesc(name, help string, typ Type, labelPairs ...string) *Desc {
	d := &Desc{Name: name, Help: help, Type: typ}
	if len(labelPairs) > 0 {
		d.Labels = make([]Label, 0, len(labelPairs)/2)
		for i := 0; i+1 < len(labelPairs); i += 2 {
			d.Labels = append(d.Labels, Label{labelPairs[i], labelPairs[i+1]})
		}
	}
	return d
}

// Sample is one value of one series, as Batch.Samples lists them.
type Sample struct {
	Desc  *Desc
	Value float64
}

// Batch is one collection: the samples of one tick, as parallel slices
// (Values[i] is the value of Descs[i]), the one shape a tick keeps from
// plugin through encoder and decoder to store. The owner resets and
// refills it every tick; readers must not keep it past the call that hands
// it to them.
type Batch struct {
	Time   time.Time
	Descs  []*Desc
	Values []float64
}

// Reset empties the batch, keeping its capacity.
func (b *Batch) Reset(t time.Time) {
	b.Time = t
	b.Descs = b.Descs[:0]
	b.Values = b.Values[:0]
}

// Add appends one sample.
func (b *Batch) Add(d *Desc, v float64) {
	b.Descs = append(b.Descs, d)
	b.Values = append(b.Values, v)
}

// Truncate drops the samples after the first n (a plugin undoing a
// partial set).
func (b *Batch) Truncate(n int) {
	b.Descs = b.Descs[:n]
	b.Values = b.Values[:n]
}

// Len is the number of samples.
func (b *Batch) Len() int { return len(b.Descs) }

// CopyFrom makes b an independent copy of src, reusing b's storage.
func (b *Batch) CopyFrom(src *Batch) {
	b.Time = src.Time
	b.Descs = append(b.Descs[:0], src.Descs...)
	b.Values = append(b.Values[:0], src.Values...)
}

// Samples returns a new slice pairing each descriptor with its value, for
// tests and tools that look at a batch sample by sample (it allocates).
func (b *Batch) Samples() []Sample {
	out := make([]Sample, len(b.Descs))
	for i, d := range b.Descs {
		out[i] = Sample{d, b.Values[i]}
	}
	return out
}
