// Package infodesc keeps the descriptor of an info-style series (value 1 or
// a constant, labels read from the kernel) and makes a new one only when a
// label value changes, so a steady-state tick compares bytes and allocates
// nothing.
package infodesc

import (
	"github.com/vigil-hpc/vigil/internal/metric"
)

// MaxValue bounds a label value taken from a file: info files are short,
// and a hostile one must not become a megabyte label.
const MaxValue = 256

// Desc is one info series.
type Desc struct {
	name, help string
	typ        metric.Type
	keys       []string
	vals       []string
	d          *metric.Desc
}

// New returns an info series with the given label names.
func New(name, help string, typ metric.Type, keys ...string) *Desc {
	return &Desc{name: name, help: help, typ: typ, keys: keys}
}

// Get returns the descriptor for these label values (one per key, in
// order), reusing the previous one when they are unchanged.
func (i *Desc) Get(vals [][]byte) *metric.Desc {
	if i.d != nil && i.same(vals) {
		return i.d
	}
	i.vals = i.vals[:0]
	pairs := make([]string, 0, 2*len(i.keys))
	for k, key := range i.keys {
		v := Clip(vals[k])
		i.vals = append(i.vals, string(v))
		pairs = append(pairs, key, string(v))
	}
	i.d = metric.NewDesc(i.name, i.help, i.typ, pairs...)
	return i.d
}

func (i *Desc) same(vals [][]byte) bool {
	if len(vals) != len(i.vals) {
		return false
	}
	for k, v := range vals {
		if i.vals[k] != string(Clip(v)) {
			return false
		}
	}
	return true
}

// Clip bounds a label value to MaxValue bytes.
func Clip(b []byte) []byte {
	if len(b) > MaxValue {
		return b[:MaxValue]
	}
	return b
}
