package wire

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// byNode records each node's last tick.
type byNode struct {
	NopHandler
	last map[string][]*metric.Desc
}

func (h *byNode) Tick(node string, _ time.Time, d []*metric.Desc, _ []float64) {
	h.last[node] = append(h.last[node][:0], d...)
}

func equalDesc(a, b *metric.Desc) bool {
	return a.Name == b.Name && a.Help == b.Help && a.Type == b.Type && slices.Equal(a.Labels, b.Labels)
}

func descsEqual(a, b []*metric.Desc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalDesc(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestTablesShareCommonPart: nodes with the same series but for a few of
// their own hold the common part of their tables once, at a relay and at
// the receiver, while their processes churn and their tables compact.
func TestTablesShareCommonPart(t *testing.T) {
	const nodes, common, churn, ticks = 30, 200, 3, 120
	src := newChurnNodes(nodes, common, churn)
	relay := &relayTo{enc: NewEncoder()}
	dec1, dec2 := NewDecoder(Limits{}, nil), NewDecoder(Limits{}, nil)
	last := &byNode{last: map[string][]*metric.Desc{}}
	want := map[string][]*metric.Desc{}
	for k := range ticks {
		out := src.tick(t, k, func(s *Stream, descs []*metric.Desc) { want[s.node] = descs })
		relay.out = relay.out[:0]
		decodeAll(t, dec1, relay, out)
		decodeAll(t, dec2, last, relay.out)
		for node, w := range want {
			if !descsEqual(last.last[node], w) {
				t.Fatalf("tick %d: %s's series differ at the receiver", k, node)
			}
		}
	}
	for name, dec := range map[string]*Decoder{"relay": dec1, "receiver": dec2} {
		own, sharing := 0, 0
		for _, s := range dec.dense {
			if s == nil {
				continue
			}
			own += s.descs.Len() - s.descs.Shared()
			if s.descs.Shared() >= common {
				sharing++
			}
		}
		// One node's table spells the common part out; the others share it.
		if sharing < nodes-1 {
			t.Errorf("%s: %d of %d tables share the common part", name, sharing, nodes)
		}
		if limit := common + nodes*(tableLimit(common+churn)-common); own > limit {
			t.Errorf("%s: %d entries of their own over all tables, want at most %d", name, own, limit)
		}
	}
}

// TestSharedTableOutlivesItsSource: a table that shares another's entries
// keeps them as they were while that other one is compacted and reset.
func TestSharedTableOutlivesItsSource(t *testing.T) {
	mk := func(prefix string, n int) []*metric.Desc {
		var d []*metric.Desc
		for i := range n {
			d = append(d, metric.NewDesc(prefix, "h", metric.Gauge, "i", strconv.Itoa(i)))
		}
		return d
	}
	common := mk("c", 20)
	enc := NewEncoder()
	a, b := enc.NewStream("a"), enc.NewStream("b")
	dec := NewDecoder(Limits{}, nil)
	h := &byNode{last: map[string][]*metric.Desc{}}
	tick := func(k int, s *Stream, descs []*metric.Desc) {
		t.Helper()
		out, err := enc.AppendTick(nil, s, time.Unix(int64(1_700_000_000+k), 0), descs, make([]float64, len(descs)))
		if err != nil {
			t.Fatal(err)
		}
		decodeAll(t, dec, h, out)
		if !descsEqual(h.last[s.node], descs) {
			t.Fatalf("tick %d of %s: series differ", k, s.node)
		}
	}
	intact := func(step string, s *Stream) {
		t.Helper()
		tb := dec.stream(s.id).descs
		if tb.Shared() != len(common) {
			t.Fatalf("%s: %s shares %d entries, want %d", step, s.node, tb.Shared(), len(common))
		}
		for i, d := range tb.All() {
			if !equalDesc(d, common[i]) {
				t.Fatalf("%s: %s's entry %d is %v, want %v", step, s.node, i, d.Labels, common[i].Labels)
			}
		}
	}
	// a starts over (a new connection) with other series while b still
	// shares its table.
	tick(0, a, common)
	tick(0, b, common)
	enc.Reset()
	tick(1, a, mk("r", 30))
	intact("reset", b)
	// Both start over again: b spells the common part out, a takes it
	// from b. Then b drops the first half of the common series and adds
	// others, so that its table is compacted: the entries it keeps move
	// to the front.
	enc.Reset()
	tick(1, b, common)
	tick(2, a, common)
	tick(2, b, common[10:])
	tick(3, b, append(common[10:], mk("n", 5)...))
	intact("compaction", a)
	if n := dec.stream(b.id).descs.Len(); n != 15 {
		t.Fatalf("b's table holds %d entries, want 15 after its compaction", n)
	}
}
