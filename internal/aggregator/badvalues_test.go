package aggregator

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/wire"
)

// gapTop is exactTop that also records gaps.
type gapTop struct {
	exactTop
	gaps map[string][][2]int64
}

func (h *gapTop) Gap(node string, from, to time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gaps[node] = append(h.gaps[node], [2]int64{from.UnixNano(), to.UnixNano()})
}

// spoiler passes a child's connection through and appends a byte to the
// payload of one values frame of stream 1 (checksum mended): value codes
// that do not decode, on a link without a key.
type spoiler struct {
	at      int64        // the values frame of stream 1 to spoil, counting from 0
	seen    atomic.Int64 // connections after a reconnect share the count
	spoiled atomic.Bool
}

func (s *spoiler) run(t *testing.T, ln net.Listener, to string) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", to)
		if err != nil {
			c.Close()
			continue
		}
		go func() { _, _ = io.Copy(c, u); c.Close() }()
		go func() {
			defer u.Close()
			hdr := make([]byte, 6)
			for {
				if _, err := io.ReadFull(c, hdr); err != nil {
					return
				}
				n := binary.BigEndian.Uint32(hdr)
				rest := make([]byte, n+4)
				if _, err := io.ReadFull(c, rest); err != nil {
					return
				}
				payload := rest[:n]
				if id, k := binary.Uvarint(payload); hdr[5]&0x7f == 17 && k > 0 && id == 1 {
					if s.seen.Add(1)-1 == s.at {
						payload = append(payload, 0xff)
						s.spoiled.Store(true)
					}
				}
				out := binary.BigEndian.AppendUint32(nil, uint32(len(payload)))
				out = append(out, hdr[4:6]...)
				out = append(out, payload...)
				out = binary.BigEndian.AppendUint32(out, crc32.Checksum(out[4:], castagnoli))
				if _, err := u.Write(out); err != nil {
					return
				}
			}
		}()
	}
}

// TestBadValuesThroughTree: one node's values frame that does not decode
// passes the aggregator unchecked (its codes unread there) and is dropped
// by the decoding top as a gap; the connections stay up, the other node
// loses nothing, and the node resumes at the keyframe the top asks for
// through the aggregator.
func TestBadValuesThroughTree(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	top := &gapTop{exactTop: exactTop{ticks: map[string]map[int64]map[string]uint64{}}, gaps: map[string][][2]int64{}}
	tln := listen(t)
	var topStats wire.ServerStats
	go wire.Serve(ctx, tln, wire.ServerOptions{Log: quiet(), Stats: &topStats}, top)
	a1 := startAgg(t, ctx, "a1", tln.Addr().String(), 0)
	pln := listen(t)
	sp := &spoiler{at: 5}
	go sp.run(t, pln, a1.Addr())
	child, streams := rackChild(t, ctx, pln.Addr().String(), nil)
	descs := []*metric.Desc{metric.NewDesc("c", "", metric.Counter), metric.NewDesc("r", "", metric.Gauge)}
	nodes := []string{"cn1", "cn2"}
	const iv = 20 * time.Millisecond
	base := time.Now().Truncate(iv)
	sent := map[string]map[int64][2]uint64{"cn1": {}, "cn2": {}}
	const ticks = 40
	var last time.Time
	for i := range ticks {
		ts := base.Add(time.Duration(i) * iv)
		for k, node := range nodes {
			v := []float64{float64(100*i+k) / 100, math.Sqrt(float64(i))}
			sent[node][ts.UnixNano()] = [2]uint64{math.Float64bits(v[0]), math.Float64bits(v[1])}
			child.Tick(streams[k], ts, descs, v)
		}
		last = ts
		time.Sleep(iv)
	}
	waitFor(t, "the last tick at the top", 10*time.Second, func() bool { return top.has("cn1", last) && top.has("cn2", last) })
	if !sp.spoiled.Load() {
		t.Fatal("no frame was spoiled")
	}
	top.mu.Lock()
	defer top.mu.Unlock()
	for _, node := range nodes {
		for ts, got := range top.ticks[node] {
			if w := sent[node][ts]; got["c"] != w[0] || got["r"] != w[1] {
				t.Errorf("%s at %v: %v, want %v", node, time.Unix(0, ts), got, w)
			}
		}
	}
	if n := len(top.ticks["cn2"]); n != ticks || len(top.gaps["cn2"]) != 0 {
		t.Errorf("cn2: %d of %d ticks, gaps %v: another node's bad frame cost it", n, ticks, top.gaps["cn2"])
	}
	// cn1 loses the spoiled tick and those before the keyframe it asked
	// for: a gap at the first at once, then one over all of them, and
	// nothing else.
	g := top.gaps["cn1"]
	if len(g) != 2 || g[0][0] != g[0][1] || g[1][0] != g[0][0] {
		t.Fatalf("cn1's gaps %v, want one at the first lost tick and one from it over the loss", g)
	}
	lost := 0
	for ts := range sent["cn1"] {
		_, got := top.ticks["cn1"][ts]
		in := ts >= g[1][0] && ts <= g[1][1]
		if got == in {
			t.Errorf("cn1 at %v: arrived %v, inside the gap %v", time.Unix(0, ts), got, in)
		}
		if in {
			lost++
		}
	}
	if lost == 0 || lost > 8 {
		t.Errorf("cn1 lost %d ticks; want a few", lost)
	}
	if topStats.BadValueFrames.Load() != 1 || topStats.ProtocolErrors.Load()+a1.wstats.ProtocolErrors.Load() != 0 {
		t.Errorf("top: %d bad value frames (want 1); protocol errors %d at the top, %d at a1 (want 0)",
			topStats.BadValueFrames.Load(), topStats.ProtocolErrors.Load(), a1.wstats.ProtocolErrors.Load())
	}
	if n := topStats.Interned(); n < len(descs) {
		t.Errorf("the top's interner holds %d descriptors; want at least the nodes' %d", n, len(descs))
	}
	if n := child.Stats().Connects.Load() + a1.client.Stats().Connects.Load(); n != 2 {
		t.Errorf("child and a1 connected %d times; want once each", n)
	}
}
