package wire_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// With the upstream down, a full queue drops the oldest ticks: when the
// upstream comes back it gets each node's newest ticks, exactly, and one
// gap per node covering exactly the ticks it lost.
func TestQueueFullDropsOldest(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const maxQueue = 256 << 10
	c := startClient(t, wire.ClientOptions{Addrs: []string{addr}, Name: "agg", MaxQueueBytes: maxQueue, KeyframeEvery: 8})
	sch := simulate.NewSchema(4)
	names := []string{"cn00001", "cn00002", "cn00003"}
	var nodes []*simulate.Node
	var streams []*wire.ClientStream
	for i, name := range names {
		nodes = append(nodes, simulate.NewNode(name, sch, uint64(i+1)))
		streams = append(streams, c.NewStream(name))
	}
	t0 := time.Unix(1_763_800_000, 0)
	const ticks = 400
	sent := make([][]metric.Batch, len(names))
	maxSeen := 0
	for i := range ticks {
		for k := range names {
			sent[k] = append(sent[k], sendTicks(c, streams[k], nodes[k], t0, i, 1)...)
		}
		maxSeen = max(maxSeen, c.QueueBytes())
	}
	dropped := int(c.Stats().Dropped.Load())
	if dropped < ticks || dropped > len(names)*ticks-100 {
		t.Fatalf("dropped %d of %d ticks: the test does not exercise a full queue", dropped, len(names)*ticks)
	}
	if maxSeen > maxQueue+4<<10 {
		t.Errorf("queue reached %d bytes, bound %d", maxSeen, maxQueue)
	}

	srv := startServer(t, addr, nil)
	want := len(names)*ticks - dropped
	waitFor(t, "queued ticks", func() bool { return srv.rec.tickCount() == want })
	// One more tick per node carries its pending gap.
	for k := range names {
		sent[k] = append(sent[k], sendTicks(c, streams[k], nodes[k], t0, ticks, 1)...)
	}
	waitFor(t, "last ticks", func() bool { return srv.rec.tickCount() == want+len(names) })
	if e := srv.stats.ProtocolErrors.Load(); e != 0 {
		t.Fatalf("%d protocol errors", e)
	}
	srv.rec.mu.Lock()
	defer srv.rec.mu.Unlock()
	for k, name := range names {
		var got []tick
		for _, tk := range srv.rec.ticks {
			if tk.node == name {
				got = append(got, tk)
			}
		}
		// The newest ticks arrive, in order and exact; the oldest do not.
		lost := len(sent[k]) - len(got)
		if lost <= 0 || lost >= ticks {
			t.Fatalf("%s: %d of %d ticks arrived", name, len(got), len(sent[k]))
		}
		for i, tk := range got {
			checkTick(t, tk, name, &sent[k][lost+i])
		}
		var gaps []gap
		for _, g := range srv.rec.gaps {
			if g.node == name {
				gaps = append(gaps, g)
			}
		}
		wantGap := gap{name, sent[k][0].Time, sent[k][lost-1].Time}
		if len(gaps) != 1 || gaps[0] != wantGap {
			t.Errorf("%s: gaps %v, want %v", name, gaps, wantGap)
		}
	}
}

// frames splits encoded bytes into frames.
func frames(t *testing.T, data []byte) (types []byte, payloads [][]byte) {
	t.Helper()
	fr := wire.NewFrameReader(bytes.NewReader(data), 0)
	for {
		typ, payload, err := fr.Next()
		if errors.Is(err, io.EOF) {
			return types, payloads
		}
		if err != nil {
			t.Fatal(err)
		}
		types, payloads = append(types, typ), append(payloads, bytes.Clone(payload))
	}
}

const (
	typValues = 17
	typKey    = 17 | 0x80
)

// A receiver that misses values frames (but gets the schemas) decodes
// exactly again from the next keyframe, periodic or asked for, also when
// the schema changed in between.
func TestKeyframeResynchronises(t *testing.T) {
	mk := func(n int) []*metric.Desc {
		var ds []*metric.Desc
		for i := range n {
			ds = append(ds, metric.NewDesc("s", "h", metric.Counter, "i", string(rune('a'+i))))
		}
		return ds
	}
	all := mk(5)
	enc := wire.NewEncoder()
	enc.SetKeyframeEvery(6)
	st := enc.NewStream("n1")
	dec := wire.NewDecoder(wire.Limits{}, nil)
	var rec recorder
	skip := func(i int) bool { return (i >= 3 && i < 6) || (i >= 9 && i < 14) || (i >= 20 && i < 23) }
	keys := 0
	for i := range 30 {
		seq := all[:3]
		if i >= 10 {
			seq = []*metric.Desc{all[4], all[0], all[2], all[3]} // changes while values are missed
		}
		if i == 23 {
			st.Keyframe()
		}
		values := make([]float64, len(seq))
		for k := range values {
			values[k] = float64(i*i*(k+1)) + 0.25*float64(k) // steady counters: delta predicted
		}
		out, err := enc.AppendTick(nil, st, time.Unix(1000+int64(i), 0), seq, values)
		if err != nil {
			t.Fatal(err)
		}
		types, payloads := frames(t, out)
		isKey := types[len(types)-1] == typKey
		if isKey {
			keys++
		}
		if wantKey := i == 6 || i == 12 || i == 18 || i == 23 || i == 29; isKey != wantKey {
			t.Fatalf("tick %d: keyframe %v, want %v", i, isKey, wantKey)
		}
		rec.ticks = rec.ticks[:0]
		for j, typ := range types {
			if (typ == typValues || typ == typKey) && skip(i) {
				continue
			}
			if err := dec.Decode(typ, payloads[j], &rec); err != nil {
				t.Fatalf("tick %d: %v", i, err)
			}
		}
		if skip(i) {
			continue
		}
		if i == 14 || i == 15 || i == 16 || i == 17 {
			// After a gap without a keyframe the receiver is out of step:
			// its values are not checked until the next keyframe.
			continue
		}
		if len(rec.ticks) != 1 || !rec.ticks[0].t.Equal(time.Unix(1000+int64(i), 0)) || !slices.Equal(rec.ticks[0].values, values) {
			t.Fatalf("tick %d: got %+v, want %v", i, rec.ticks, values)
		}
		for k := range seq {
			if !sameDesc(rec.ticks[0].descs[k], seq[k]) {
				t.Fatalf("tick %d: desc %d = %v, want %v", i, k, rec.ticks[0].descs[k].Labels, seq[k].Labels)
			}
		}
	}
	if keys != 5 {
		t.Errorf("%d keyframes, want 5", keys)
	}
}

// A reset schema starts from zero anyway, so it is not followed by a
// keyframe; the keyframe period counts from it.
func TestKeyframeAfterReset(t *testing.T) {
	d := []*metric.Desc{metric.NewDesc("x", "", metric.Gauge)}
	enc := wire.NewEncoder()
	enc.SetKeyframeEvery(4)
	st := enc.NewStream("n1")
	dec := wire.NewDecoder(wire.Limits{}, nil)
	var rec recorder
	var got []bool
	for i := range 12 {
		if i == 6 {
			enc.Reset()
			dec = wire.NewDecoder(wire.Limits{}, nil)
			st.Keyframe() // overridden by the reset schema
		}
		out, err := enc.AppendTick(nil, st, time.Unix(int64(i), 0), d, []float64{float64(i) * 1.5})
		if err != nil {
			t.Fatal(err)
		}
		types, _ := frames(t, out)
		got = append(got, types[len(types)-1] == typKey)
		rec.ticks = rec.ticks[:0]
		if err := decodeAll(dec, &rec, out); err != nil || len(rec.ticks) != 1 || rec.ticks[0].values[0] != float64(i)*1.5 {
			t.Fatalf("tick %d: %v %+v", i, err, rec.ticks)
		}
	}
	want := []bool{false, false, false, false, true, false, false, false, false, false, true, false}
	if !slices.Equal(got, want) {
		t.Errorf("keyframes %v, want %v", got, want)
	}
}
