package wire

import (
	"strconv"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

func testBatch(n int) *metric.Batch {
	b := &metric.Batch{}
	b.Reset(time.Unix(1000, 0))
	for i := range n {
		d := metric.NewDesc("node_cpu_seconds_total", "cpu", metric.Counter, "cpu", strconv.Itoa(i/8), "mode", strconv.Itoa(i%8))
		b.Add(d, float64(i)*100.25)
	}
	return b
}

func advance(b *metric.Batch, i int) {
	b.Time = b.Time.Add(time.Second)
	for k := range b.Values {
		if k%3 != 0 {
			b.Values[k] += float64((i*k)%17) / 100
		}
	}
}

// The sampler side encodes each tick without allocating once warm.
func TestEncodeZeroAlloc(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocations are not meaningful under -race")
	}
	b := testBatch(300)
	enc := NewEncoder()
	st := enc.NewStream("cn00001")
	buf := make([]byte, 0, 4096)
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		i++
		advance(b, i)
		var err error
		if buf, err = enc.AppendTick(buf[:0], st, b.Time, b.Descs, b.Values); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AppendTick: %v allocs per tick, want 0", allocs)
	}
}

// Queueing a tick on a Client (encode into a recycled buffer, its values
// kept in a recycled one until acknowledged) allocates nothing once the
// queue's buffers exist.
func TestClientTickZeroAlloc(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocations are not meaningful under -race")
	}
	c, err := NewClient(ClientOptions{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	cs := c.NewStream("cn00001")
	b := testBatch(300)
	var w []byte
	var off uint64
	conn := c.sq.connected()
	i := 0
	tick := func() {
		i++
		advance(b, i)
		c.Tick(cs, b.Time, b.Descs, b.Values)
		w = c.collect(w[:0], 1<<20) // what the sender goroutine does
		off += uint64(len(w))
		c.sq.written(nil, off, nil)
		c.sq.acked(conn, off) // and the ack reader
	}
	for range 3 {
		tick()
	}
	if allocs := testing.AllocsPerRun(100, tick); allocs != 0 {
		t.Errorf("Client.Tick: %v allocs per tick, want 0", allocs)
	}
	if c.stats.Ticks.Load() < 100 || c.stats.Dropped.Load() != 0 {
		t.Errorf("ticks %d dropped %d", c.stats.Ticks.Load(), c.stats.Dropped.Load())
	}
}

// A receiver decodes steady ticks without allocating.
func TestDecodeZeroAlloc(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocations are not meaningful under -race")
	}
	b := testBatch(300)
	enc := NewEncoder()
	st := enc.NewStream("cn00001")
	var frames [][]byte
	for i := range 110 {
		advance(b, i)
		out, err := enc.AppendTick(nil, st, b.Time, b.Descs, b.Values)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, out)
	}
	dec := NewDecoder(Limits{}, nil)
	decode := func(data []byte) {
		p := data
		for len(p) > 0 {
			n := int(p[0])<<24 | int(p[1])<<16 | int(p[2])<<8 | int(p[3])
			if err := dec.Decode(p[5], p[headerSize:headerSize+n], NopHandler{}); err != nil {
				t.Fatal(err)
			}
			p = p[headerSize+n+trailerSize:]
		}
	}
	decode(frames[0])
	i := 1
	allocs := testing.AllocsPerRun(100, func() {
		decode(frames[i])
		i++
	})
	if allocs != 0 {
		t.Errorf("Decode: %v allocs per tick, want 0", allocs)
	}
}
