package wire_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/simulate"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// record samples ticks of a simulated node (the data the simulator streams).
func record(cpus, ticks int, interval time.Duration, seed uint64) []metric.Batch {
	n := simulate.NewNode("cn00001", simulate.NewSchema(cpus), seed)
	out := make([]metric.Batch, ticks)
	t0 := time.Unix(1_763_800_000, 0)
	for i := range out {
		out[i].Reset(t0.Add(time.Duration(i) * interval))
		n.Sample(out[i].Time, interval, &out[i])
	}
	return out
}

var benchCases = []struct {
	cpus     int
	interval time.Duration
}{{16, time.Second}, {16, 100 * time.Millisecond}, {64, time.Second}}

// BenchmarkEncode encodes recorded ticks of one node; bytes/value counts
// everything on the wire (frame headers, checksums, schema updates when a
// top process changes, a keyframe per 64 ticks, one full schema per 1000
// ticks).
func BenchmarkEncode(b *testing.B) {
	for _, bc := range benchCases {
		b.Run(fmt.Sprintf("cpus=%d/interval=%s", bc.cpus, bc.interval), func(b *testing.B) {
			ticks := record(bc.cpus, 1000, bc.interval, 42)
			enc := wire.NewEncoder()
			st := enc.NewStream("cn00001")
			buf := make([]byte, 0, 64<<10)
			var bytesOut, values, i int
			b.ReportAllocs()
			for b.Loop() {
				if i == len(ticks) {
					i = 0
					enc.Reset() // time goes back: start over as after a reconnect
				}
				var err error
				buf, err = enc.AppendTick(buf[:0], st, ticks[i].Time, ticks[i].Descs, ticks[i].Values)
				if err != nil {
					b.Fatal(err)
				}
				bytesOut += len(buf)
				values += ticks[i].Len()
				i++
			}
			b.ReportMetric(float64(bytesOut)/float64(values), "bytes/value")
			b.ReportMetric(float64(values)/float64(b.N), "values/tick")
		})
	}
}

// BenchmarkDecode decodes the frames of recorded ticks; one op is one tick.
func BenchmarkDecode(b *testing.B) { benchDecode(b, wire.NopHandler{}) }

// BenchmarkCheck checks the same frames as a relaying aggregator does,
// without computing values.
func BenchmarkCheck(b *testing.B) { benchDecode(b, relayNop{}) }

type relayNop struct{ wire.NopHandler }

func (relayNop) RelaySchema(string, *wire.RelaySchema)         {}
func (relayNop) RelayTick(string, time.Time, *wire.RelayFrame) {}

func benchDecode(b *testing.B, h wire.Handler) {
	for _, bc := range benchCases {
		b.Run(fmt.Sprintf("cpus=%d/interval=%s", bc.cpus, bc.interval), func(b *testing.B) {
			ticks := record(bc.cpus, 1000, bc.interval, 42)
			enc := wire.NewEncoder()
			st := enc.NewStream("cn00001")
			frames := make([][]byte, len(ticks))
			for i := range ticks {
				var err error
				if frames[i], err = enc.AppendTick(nil, st, ticks[i].Time, ticks[i].Descs, ticks[i].Values); err != nil {
					b.Fatal(err)
				}
			}
			// Tick 0 carries a reset schema, so wrapping around is valid.
			dec := wire.NewDecoder(wire.Limits{}, nil)
			var r bytes.Reader
			fr := wire.NewFrameReader(&r, 0)
			var values, i int
			b.ReportAllocs()
			for b.Loop() {
				if i == len(frames) {
					i = 0
				}
				r.Reset(frames[i])
				for {
					typ, payload, err := fr.Next()
					if err != nil {
						break
					}
					if err := dec.Decode(typ, payload, h); err != nil {
						b.Fatal(err)
					}
				}
				values += ticks[i].Len()
				i++
			}
			b.ReportMetric(float64(values)/b.Elapsed().Seconds(), "values/s")
		})
	}
}

// BenchmarkCheckStreams checks a connection's frames of 5,000 nodes, as
// an aggregator's connection to another carries them: node after node,
// each its own stream (BenchmarkCheck has one stream). One op is one
// node's tick.
func BenchmarkCheckStreams(b *testing.B) {
	const nodes, ticks = 5000, 8
	const valuesFrame = 17 // a Values frame's type (docs/format/wire.md), 0x80: keyframe
	sch := simulate.NewSchema(16)
	enc := wire.NewEncoder()
	sims := make([]*simulate.Node, nodes)
	streams := make([]*wire.Stream, nodes)
	for i := range sims {
		sims[i] = simulate.NewNode(simulate.NodeName(i+1), sch, uint64(i))
		streams[i] = enc.NewStream(simulate.NodeName(i + 1))
	}
	var frames []byte
	var batch metric.Batch
	values := 0
	t0 := time.Unix(1_763_800_000, 0)
	first := 0 // bytes of the first tick (every schema)
	for k := range ticks {
		t := t0.Add(time.Duration(k) * time.Second)
		for i, n := range sims {
			if k == 1 {
				// Ticks 1.. are checked again and again: the first of
				// them starts from the initial state.
				streams[i].Keyframe()
			}
			batch.Reset(t)
			n.Sample(t, time.Second, &batch)
			var err error
			if frames, err = enc.AppendTick(frames, streams[i], batch.Time, batch.Descs, batch.Values); err != nil {
				b.Fatal(err)
			}
			if k > 0 {
				values += batch.Len()
			}
		}
		if k == 0 {
			first = len(frames)
		}
	}
	dec := wire.NewDecoder(wire.Limits{}, nil)
	var r bytes.Reader
	fr := wire.NewFrameReader(&r, 0)
	decodeAll := func(in []byte) {
		r.Reset(in)
		for {
			typ, payload, err := fr.Next()
			if err != nil {
				return
			}
			if err := dec.Decode(typ, payload, relayNop{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	decodeAll(frames[:first])
	rest := frames[first:]
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for b.Loop() {
		if done%(nodes*(ticks-1)) == 0 {
			r.Reset(rest)
		}
		typ, payload, err := fr.Next()
		for err == nil && typ&^0x80 != valuesFrame { // a schema update
			if err = dec.Decode(typ, payload, relayNop{}); err == nil {
				typ, payload, err = fr.Next()
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := dec.Decode(typ, payload, relayNop{}); err != nil {
			b.Fatal(err)
		}
		done++
	}
	b.StopTimer()
	b.ReportMetric(float64(values)/float64(nodes*(ticks-1))*float64(done)/b.Elapsed().Seconds(), "values/s")
}
