package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// checker is a Handler comparing every decoded tick with what was queued.
type checker struct {
	NopHandler
	t         *testing.T
	sent      map[string][][]float64 // node -> values by tick number
	delivered map[string]map[int]bool
	gaps      map[string][][2]int
	events    int
}

func (h *checker) Tick(node string, t time.Time, descs []*metric.Desc, values []float64) {
	i := int(t.Unix())
	if i < 0 || i >= len(h.sent[node]) {
		h.t.Fatalf("%s: tick at %v, never sent", node, t)
	}
	want := h.sent[node][i]
	if h.delivered[node][i] {
		h.t.Fatalf("%s tick %d delivered twice", node, i)
	}
	h.delivered[node][i] = true
	if len(values) != len(want) {
		h.t.Fatalf("%s tick %d: %d values, want %d", node, i, len(values), len(want))
	}
	for k := range want {
		if math.Float64bits(values[k]) != math.Float64bits(want[k]) {
			h.t.Fatalf("%s tick %d value %d = %v, want %v", node, i, k, values[k], want[k])
		}
	}
}

func (h *checker) Gap(node string, from, to time.Time) {
	h.gaps[node] = append(h.gaps[node], [2]int{int(from.Unix()), int(to.Unix())})
}

func (h *checker) NodeState(string, bool, time.Time) { h.events++ }

// A full queue that keeps dropping, with streams sharing descriptors
// (copied schemas), a stream whose series churn every tick and node-level
// events, never sends an undecodable or wrong tick, and reports exactly
// the ticks it dropped as gaps.
func TestQueueDropsStayDecodable(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { queueDrops(t, seed) })
	}
}

func queueDrops(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c, err := NewClient(ClientOptions{Addrs: []string{"127.0.0.1:1"}, MaxQueueBytes: 1500 + int(seed)*500, KeyframeEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	shared := make([]*metric.Desc, 12)
	for i := range shared {
		shared[i] = metric.NewDesc("node_cpu_seconds_total", "cpu", metric.Counter, "cpu", strconv.Itoa(i))
	}
	nodes := []string{"cn1", "cn2", "cn3", "cn4"}
	var streams []*ClientStream
	for _, n := range nodes {
		streams = append(streams, c.NewStream(n))
	}
	h := &checker{t: t, sent: map[string][][]float64{}, delivered: map[string]map[int]bool{}, gaps: map[string][][2]int{}}
	for _, n := range nodes {
		h.delivered[n] = map[int]bool{}
	}
	dec := NewDecoder(Limits{}, nil)
	var w []byte
	deliver := func(max int) {
		for {
			w = c.collect(w[:0], max)
			c.sq.inflight = c.sq.inflight[:0]
			if len(w) == 0 {
				return
			}
			fr := NewFrameReader(bytes.NewReader(w), 0)
			for {
				typ, payload, err := fr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := dec.Decode(typ, payload, h); err != nil {
					t.Fatalf("decode: %v", err)
				}
			}
			if max < 1<<20 {
				return
			}
		}
	}
	events := 0
	tick := func(k int) {
		n := nodes[k]
		i := len(h.sent[n])
		descs := shared
		if k == 2 { // churn: a short-lived series per tick
			descs = append(shared[:8:8], metric.NewDesc("proc_cpu", "p", metric.Counter, "pid", strconv.Itoa(i)),
				metric.NewDesc("proc_cpu", "p", metric.Counter, "pid", strconv.Itoa(i+1)))
		}
		if k == 3 && i%10 >= 5 {
			descs = shared[4:] // series come and go
		}
		vals := make([]float64, len(descs))
		for j := range vals {
			vals[j] = float64(i*(j+1)) + float64(rng.IntN(100))/100
		}
		h.sent[n] = append(h.sent[n], vals)
		c.Tick(streams[k], time.Unix(int64(i), 0), descs, vals)
	}
	for step := range 3000 {
		switch r := rng.IntN(100); {
		case r < 80:
			tick(rng.IntN(len(nodes)))
		case r < 83:
			c.NodeState("cn9", step%2 == 0, time.Unix(int64(step), 0))
			events++
		case r < 93 && step/300%2 == 1: // upstream up half the time, slow
			deliver(rng.IntN(600))
		}
	}
	deliver(1 << 20)
	for k := range nodes { // a last tick each carries the pending gaps
		tick(k)
	}
	deliver(1 << 20)

	dropped := 0
	for _, n := range nodes {
		var lost []int
		for i := range h.sent[n] {
			if !h.delivered[n][i] {
				lost = append(lost, i)
			}
		}
		dropped += len(lost)
		in := func(i int) bool {
			for _, g := range h.gaps[n] {
				if g[0] <= i && i <= g[1] {
					return true
				}
			}
			return false
		}
		for _, i := range lost {
			if !in(i) {
				t.Errorf("%s: tick %d lost but in no gap %v", n, i, h.gaps[n])
			}
		}
		for i := range h.delivered[n] {
			if in(i) {
				t.Errorf("%s: tick %d delivered but in gap %v", n, i, h.gaps[n])
			}
		}
		if len(lost) == 0 || len(h.delivered[n]) < len(h.sent[n])/10 {
			t.Errorf("%s: %d of %d ticks delivered: the queue was not full, or dropped far too much", n, len(h.delivered[n]), len(h.sent[n]))
		}
	}
	if d := int(c.stats.Dropped.Load()); d != dropped {
		t.Errorf("Dropped = %d, ticks lost %d", d, dropped)
	}
	if got := h.events + int(c.stats.DroppedEvents.Load()); got != events {
		t.Errorf("%d node states delivered + %d dropped, %d sent", h.events, c.stats.DroppedEvents.Load(), events)
	}
	if c.sq.bytes != 0 || c.sq.ndead != 0 {
		t.Errorf("drained queue: %d bytes, %d tombstones", c.sq.bytes, c.sq.ndead)
	}
}

// Node-level frames are dropped, oldest first and counted, only when the
// queue holds nothing else.
func TestQueueDropsEventsLast(t *testing.T) {
	c, err := NewClient(ClientOptions{Addrs: []string{"127.0.0.1:1"}, MaxQueueBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		c.NodeState("cn1", i%2 == 0, time.Unix(int64(i), 0))
	}
	kept := 30 - int(c.stats.DroppedEvents.Load())
	if kept <= 1 || kept >= 30 || c.stats.Dropped.Load() != 0 {
		t.Fatalf("%d events kept, %d ticks dropped", kept, c.stats.Dropped.Load())
	}
	var got []time.Time
	h := &stateTimes{&got}
	w := c.collect(nil, 1<<20)
	if _, err := decodeAllInto(NewDecoder(Limits{}, nil), h, w); err != nil {
		t.Fatal(err)
	}
	if len(got) != kept || !got[0].Equal(time.Unix(int64(30-kept), 0)) || !got[kept-1].Equal(time.Unix(29, 0)) {
		t.Errorf("delivered %v, want the newest %d", got, kept)
	}
}

type stateTimes struct{ ts *[]time.Time }

func (stateTimes) Connect(Peer)                                      {}
func (stateTimes) Disconnect(Peer, error)                            {}
func (stateTimes) Schema(string, []*metric.Desc)                     {}
func (stateTimes) Tick(string, time.Time, []*metric.Desc, []float64) {}
func (stateTimes) Gap(string, time.Time, time.Time)                  {}
func (h stateTimes) NodeState(_ string, _ bool, t time.Time)         { *h.ts = append(*h.ts, t) }
