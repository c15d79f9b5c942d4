package wire

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// relayTo passes relayed frames on to enc, one stream per source.
type relayTo struct {
	NopHandler
	enc *Encoder
	out []byte
}

func (r *relayTo) stream(src *RelaySource, node string) *Stream {
	if s, ok := src.Fwd.(*Stream); ok {
		return s
	}
	s := r.enc.NewStream(node)
	src.Fwd = s
	return s
}

func (r *relayTo) RelaySchema(node string, sc *RelaySchema) {
	r.out = r.enc.AppendRelaySchema(r.out, r.stream(sc.Source, node), sc)
}

func (r *relayTo) RelayTick(node string, _ time.Time, f *RelayFrame) {
	r.out = r.enc.AppendRelay(r.out, r.stream(f.Source, node), f, false)
}

// churnNodes sends nodes whose series are common ones, the same on every
// node, then churn processes of their own, one of them new every tick.
type churnNodes struct {
	enc     *Encoder
	streams []*Stream
	common  []*metric.Desc
	churn   int
}

func newChurnNodes(nodes, common, churn int) *churnNodes {
	c := &churnNodes{enc: NewEncoder(), churn: churn}
	for i := range common {
		c.common = append(c.common, metric.NewDesc("node_x", "x", metric.Gauge, "i", strconv.Itoa(i)))
	}
	for n := range nodes {
		c.streams = append(c.streams, c.enc.NewStream("cn"+strconv.Itoa(n)))
	}
	return c
}

// tick encodes every node's tick k, telling each (if set) what it sent.
func (c *churnNodes) tick(t *testing.T, k int, each func(s *Stream, descs []*metric.Desc)) []byte {
	t.Helper()
	var out []byte
	for n, s := range c.streams {
		descs := append([]*metric.Desc(nil), c.common...)
		for i := range c.churn {
			// A process that lives churn ticks: one new series a tick.
			pid := strconv.Itoa(n*100000 + k - i)
			descs = append(descs, metric.NewDesc("proc_cpu", "p", metric.Counter, "pid", pid))
		}
		vals := make([]float64, len(descs))
		for i := range vals {
			vals[i] = float64(k + i)
		}
		var err error
		if out, err = c.enc.AppendTick(out, s, time.Unix(int64(1_700_000_000+k), 0), descs, vals); err != nil {
			t.Fatal(err)
		}
		if each != nil {
			each(s, descs)
		}
	}
	return out
}

func decodeAll(t *testing.T, dec *Decoder, h Handler, data []byte) {
	t.Helper()
	if _, err := decodeAllInto(dec, h, data); err != nil {
		t.Fatal(err)
	}
}

// TestChurnDoesNotGrowMemory: series that come and go (a node's top
// processes, its jobs) leave no descriptors behind, through a relay: the
// sender compacts its table, the relay's and the receiver's tables follow,
// and nothing else (the interners, the relay encoder's index of known
// descriptors) keeps the dead ones.
func TestChurnDoesNotGrowMemory(t *testing.T) {
	const nodes, stable, churn, ticks = 40, 20, 3, 400
	src := newChurnNodes(nodes, stable, churn)
	enc := src.enc
	in1, in2 := NewInterner(0), NewInterner(0)
	relay := &relayTo{enc: NewEncoder()}
	dec1, dec2 := NewDecoder(Limits{}, in1), NewDecoder(Limits{}, in2)
	var last lastTick
	for k := range ticks {
		out := src.tick(t, k, nil)
		relay.out = relay.out[:0]
		decodeAll(t, dec1, relay, out)
		decodeAll(t, dec2, &last, relay.out)
		if got := last.descs[stable].Labels[0].Value; got != strconv.Itoa((nodes-1)*100000+k) {
			t.Fatalf("tick %d: the last node's newest process is %s", k, got)
		}
	}
	// Live: the shared series and, per node, a table of at most
	// tableLimit entries; without forgetting, nodes × ticks descriptors.
	limit := stable + nodes*(tableLimit(stable+churn)-stable)
	for range 20 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		if in1.Len() <= limit && in2.Len() <= limit {
			break
		}
	}
	if in1.Len() > limit || in2.Len() > limit {
		t.Errorf("interned descriptors after %d ticks: relay %d, receiver %d; want at most %d", ticks, in1.Len(), in2.Len(), limit)
	}
	if n := len(relay.enc.known); n > limit {
		t.Errorf("the relay's index of known descriptors holds %d; want at most %d", n, limit)
	}
	if n := len(enc.known); n > limit {
		t.Errorf("the sender's index of known descriptors holds %d; want at most %d", n, limit)
	}
	// The decoders' tables are what must keep the live descriptors.
	runtime.KeepAlive(dec1)
	runtime.KeepAlive(dec2)
	if in2.Len() < stable+nodes*churn {
		t.Errorf("receiver: %d descriptors interned while its tables hold at least %d", in2.Len(), stable+nodes*churn)
	}
}
