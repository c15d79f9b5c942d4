package wire

import (
	"iter"
	"slices"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// Table is a stream's descriptor table, which schema frames index. It is
// a prefix shared with other streams' tables, then entries of its own:
// the nodes of a cluster have the same few hundred series in the same
// order and differ in a few (processes, jobs), and an aggregator keeps a
// table for each of tens of thousands of nodes, so the common part is
// held once rather than once per node. A shared prefix comes from a
// schema that copies a run of another table from its start (descCopy),
// which is how a sender spells out its second node's table onwards.
//
// Entries below a table's length are never written once another table
// may share them: changes other than appends (a reset, a compaction) make
// new arrays, and a view handed to a relay (frozen) has no spare capacity.
type Table struct {
	base []*metric.Desc // shared with other tables: read only
	own  []*metric.Desc
}

// Len is the number of entries.
func (t Table) Len() int { return len(t.base) + len(t.own) }

// At returns entry i (0 <= i < Len).
func (t Table) At(i int) *metric.Desc {
	if i < len(t.base) {
		return t.base[i]
	}
	return t.own[i-len(t.base)]
}

// All yields the entries in order with their indexes.
func (t Table) All() iter.Seq2[int, *metric.Desc] {
	return func(yield func(int, *metric.Desc) bool) {
		for i, d := range t.base {
			if !yield(i, d) {
				return
			}
		}
		for i, d := range t.own {
			if !yield(len(t.base)+i, d) {
				return
			}
		}
	}
}

// Shared is the number of entries held in common with another table.
func (t Table) Shared() int { return len(t.base) }

// add appends d.
func (t *Table) add(d *metric.Desc) { t.own = append(t.own, d) }

// reserve makes room for n more entries without append's doubling.
func (t *Table) reserve(n int) { t.own = grow(t.own, n) }

// frozen is a view of t whose appends cannot reach t's arrays.
func (t Table) frozen() Table {
	return Table{base: t.base, own: t.own[:len(t.own):len(t.own)]}
}

// prefix returns t's first n entries as one read-only slice, or nil if
// they span both parts.
func (t Table) prefix(n int) []*metric.Desc {
	switch {
	case n <= len(t.base):
		return t.base[:n:n]
	case len(t.base) == 0 && n <= len(t.own):
		return t.own[:n:n]
	}
	return nil
}

// copyFrom appends src's entries start to start+n (in range). A run from
// src's start into an empty table, or one that continues the prefix this
// table already shares with src, is shared rather than copied.
func (t *Table) copyFrom(src Table, start, n int) {
	if len(t.own) == 0 && start == len(t.base) {
		if p := src.prefix(start + n); p != nil && (len(t.base) == 0 || &p[0] == &t.base[0]) {
			t.base = p
			return
		}
	}
	t.reserve(n)
	for i := range n {
		t.add(src.At(start + i))
	}
}

// compactTable keeps the entries used (indexes into t, any order), in
// table order, with their state (a value state per entry or a checker's,
// or empty; compacted in place). Encoder and decoder share it so both
// renumber alike. The shared prefix stays shared when all of it is kept;
// the rest goes to a new array, as t's may be shared.
func compactTable[S any](t Table, state []S, used []int32) (Table, []S) {
	n := t.Len()
	keep := make([]bool, n)
	for _, i := range used {
		keep[i] = true
	}
	kept := 0
	for _, k := range keep {
		if k {
			kept++
		}
	}
	var out Table
	from := 0
	if !slices.Contains(keep[:len(t.base)], false) {
		out.base, from = t.base, len(t.base)
	}
	out.own = make([]*metric.Desc, 0, kept-from)
	j := 0
	for i := range n {
		if !keep[i] {
			continue
		}
		if i >= from {
			out.own = append(out.own, t.At(i))
		}
		if len(state) > 0 {
			state[j] = state[i]
		}
		j++
	}
	return out, state[:min(j, len(state))]
}
