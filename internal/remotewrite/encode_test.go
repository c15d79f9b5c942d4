package remotewrite

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/vigil-hpc/vigil/internal/metric"
	"github.com/vigil-hpc/vigil/internal/testutil"
)

// decode parses what appendWriteRequest wrote with the upstream generated
// code, so the tests check the bytes against the protocol, not against
// this package's idea of it.
func decode(t testing.TB, raw []byte) prompb.WriteRequest {
	t.Helper()
	var req prompb.WriteRequest
	if err := req.Unmarshal(raw); err != nil {
		t.Fatalf("upstream decoder refuses our bytes: %v", err)
	}
	return req
}

func labelsOf(ts prompb.TimeSeries) string {
	s := ""
	for _, l := range ts.Labels {
		s += fmt.Sprintf("%s=%q,", l.Name, l.Value)
	}
	return s
}

func TestEncodeDecodes(t *testing.T) {
	cpu := metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "mode", "idle", "cpu", "0")
	load := metric.NewDesc("node_load1", "", metric.Gauge)
	long := metric.NewDesc("x", "", metric.Gauge, "path", strings.Repeat("p", 300)) // multi-byte varint lengths
	samples := []sample{
		{labels: appendLabels(nil, "cn01", cpu), t: 1_700_000_000_123, v: 12.5},
		{labels: appendLabels(nil, "cn02", load), t: -5, v: math.Inf(-1)},
		{labels: appendLabels(nil, "n", long), t: 0, v: math.NaN()},
	}
	prefix := []byte("keep")
	raw := appendWriteRequest(append([]byte(nil), prefix...), samples)
	if string(raw[:4]) != "keep" {
		t.Fatalf("prefix overwritten: %q", raw[:4])
	}
	req := decode(t, raw[4:])
	if len(req.Timeseries) != 3 {
		t.Fatalf("got %d series, want 3", len(req.Timeseries))
	}
	want := []string{
		`__name__="node_cpu_seconds_total",cpu="0",mode="idle",node="cn01",`,
		`__name__="node_load1",node="cn02",`,
		`__name__="x",node="n",path="` + strings.Repeat("p", 300) + `",`,
	}
	for i, ts := range req.Timeseries {
		if got := labelsOf(ts); got != want[i] {
			t.Errorf("series %d labels = %s, want %s", i, got, want[i])
		}
		if len(ts.Samples) != 1 {
			t.Fatalf("series %d: %d samples", i, len(ts.Samples))
		}
		got := ts.Samples[0]
		if got.Timestamp != samples[i].t || math.Float64bits(got.Value) != math.Float64bits(samples[i].v) {
			t.Errorf("series %d sample = %v@%d, want %v@%d", i, got.Value, got.Timestamp, samples[i].v, samples[i].t)
		}
	}
}

func TestLabelsReservedDropped(t *testing.T) {
	d := metric.NewDesc("m", "", metric.Gauge, "node", "spoof", "__name__", "other", "a", "b")
	req := decode(t, appendWriteRequest(nil, []sample{{labels: appendLabels(nil, "cn01", d)}}))
	if got, want := labelsOf(req.Timeseries[0]), `__name__="m",a="b",exported_node="spoof",node="cn01",`; got != want {
		t.Errorf("labels = %s, want %s", got, want)
	}
}

func FuzzEncode(f *testing.F) {
	f.Add("m", "cn01", "a", "b", int64(1), 1.5)
	f.Add("", "", "", "", int64(-1), math.NaN())
	f.Fuzz(func(t *testing.T, name, node, ln, lv string, ts int64, v float64) {
		d := metric.NewDesc(name, "", metric.Gauge, ln, lv)
		raw := appendWriteRequest(nil, []sample{{labels: appendLabels(nil, node, d), t: ts, v: v}, {labels: appendLabels(nil, node, d), t: ts + 1, v: v}})
		var req prompb.WriteRequest
		if err := req.Unmarshal(raw); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(req.Timeseries) != 2 || req.Timeseries[1].Samples[0].Timestamp != ts+1 {
			t.Fatalf("round trip lost data: %+v", req.Timeseries)
		}
		for _, l := range req.Timeseries[0].Labels {
			if l.Name == "node" && l.Value != node {
				t.Fatalf("node = %q, want %q", l.Value, node)
			}
		}
	})
}

func TestEncodeAllocs(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	samples := benchSamples(100, 20)
	var raw, frame []byte
	raw = appendWriteRequest(raw, samples)
	frame = snappy.Encode(frame, raw)
	allocs := testing.AllocsPerRun(100, func() {
		raw = appendWriteRequest(raw[:0], samples)
		frame = snappy.Encode(frame[:cap(frame)], raw)
	})
	if allocs != 0 {
		t.Errorf("encoding a batch allocates %v times, want 0", allocs)
	}
}

func benchSamples(nodes, perNode int) []sample {
	out := make([]sample, 0, nodes*perNode)
	for n := range nodes {
		for i := range perNode {
			d := metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", fmt.Sprint(i), "mode", "user")
			out = append(out, sample{labels: appendLabels(nil, fmt.Sprintf("cn%04d", n), d), t: 1_700_000_000_000, v: float64(n*i) + 0.25})
		}
	}
	return out
}

// BenchmarkRemoteWriteEncode measures protobuf + snappy of one full batch
// (max_samples_per_send samples), the per-batch work of a destination.
func BenchmarkRemoteWriteEncode(b *testing.B) {
	samples := benchSamples(100, 20) // 2000 = DefaultMaxSamplesPerSend
	var raw, frame []byte
	b.ReportAllocs()
	for b.Loop() {
		raw = appendWriteRequest(raw[:0], samples)
		frame = snappy.Encode(frame[:cap(frame)], raw)
	}
	b.ReportMetric(float64(len(samples))*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric(float64(len(frame))/float64(len(samples)), "bytes/sample")
}

// BenchmarkTap measures what remote write adds to the ingest path per
// value: label sets found and samples queued, for 2,000 nodes of 321
// series (642,000 series). "series-map" looks each value up in the map of
// all series (the path of add, as every tick went before); "per-node" is
// the tick path. One op is one node's tick.
func BenchmarkTap(b *testing.B) {
	const nodes, perNode = 2000, 321
	descs := make([]*metric.Desc, perNode)
	for i := range descs {
		descs[i] = metric.NewDesc("node_cpu_seconds_total", "", metric.Counter, "cpu", fmt.Sprint(i/8), "mode", fmt.Sprint(i%8))
	}
	names := make([]string, nodes)
	for n := range names {
		names[n] = fmt.Sprintf("cn%05d", n)
	}
	values := make([]float64, perNode)
	for _, path := range []string{"series-map", "per-node"} {
		b.Run(path, func(b *testing.B) {
			w, err := New(nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			w.queues = []*queue{newQueue(Config{URL: "http://x/", QueueCapacity: 1 << 16}, w.log)}
			add := func(n int) { w.addTick(names[n], 1, descs, values, false) }
			if path == "series-map" {
				add = func(n int) { w.add(names[n], 1, descs, values) }
			}
			for n := range nodes { // fill the caches
				add(n)
			}
			n := 0
			b.ResetTimer()
			for b.Loop() {
				add(n)
				if n++; n == nodes {
					n = 0
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perNode), "ns/value")
		})
	}
}
