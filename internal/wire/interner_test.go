package wire

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"runtime"
	"testing"
	"time"
	"unsafe"
	"weak"

	"github.com/vigil-hpc/vigil/internal/metric"
)

// internKey is the interning key of d, as Decoder.desc builds it.
func internKey(d *metric.Desc) []byte {
	k := appendString([]byte{byte(d.Type)}, d.Name)
	k = appendString(k, d.Help)
	k = binary.AppendUvarint(k, uint64(len(d.Labels)))
	for _, l := range d.Labels {
		k = appendString(appendString(k, l.Name), l.Value)
	}
	return k
}

// TestInternerForgets: a descriptor anyone holds keeps its pointer; one no
// one holds is forgotten after a collection, so churning series (a
// finished job's) do not grow an aggregator's memory for ever.
func TestInternerForgets(t *testing.T) {
	in := NewInterner(0)
	desc := func(job int) *metric.Desc {
		return metric.NewDesc("slurm_job_cpu_seconds", "CPU time of the job.", metric.Counter, "job", fmt.Sprint(job))
	}
	held := in.lookup(internKey(desc(0)))
	if held.Name != "slurm_job_cpu_seconds" || held.Labels[0].Value != "0" {
		t.Fatalf("interned %+v", held)
	}
	for j := 1; j <= 1000; j++ {
		a := in.lookup(internKey(desc(j)))
		if b := in.lookup(internKey(desc(j))); a != b {
			t.Fatalf("job %d: two pointers for one series while held", j)
		}
		if a.Help != held.Help || a.Labels[0].Value != fmt.Sprint(j) {
			t.Fatalf("job %d: %+v", j, a)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for in.Len() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors still interned after collections; want only the held one", in.Len())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if again := in.lookup(internKey(desc(0))); again != held {
		t.Fatal("a held descriptor was forgotten")
	}
	runtime.KeepAlive(held)
	// Names and help texts are shared between descriptors.
	a, b := in.lookup(internKey(desc(2000))), in.lookup(internKey(desc(2001)))
	if unsafe.StringData(a.Help) != unsafe.StringData(b.Help) {
		t.Error("help text copied per descriptor")
	}
}

// TestInternerHashMeet: two keys with one hash (forced here; the seed is
// random) give each its own descriptor, never the other's.
func TestInternerHashMeet(t *testing.T) {
	in := NewInterner(0)
	a := metric.NewDesc("node_load1", "1m load average.", metric.Gauge)
	b := in.lookup(internKey(metric.NewDesc("node_load5", "5m load average.", metric.Gauge)))
	in.m[maphash.Bytes(in.seed, internKey(a))] = weak.Make(b)
	got := in.lookup(internKey(a))
	if got == b || got.Name != "node_load1" || got.Help != a.Help {
		t.Fatalf("lookup of node_load1 gave %+v", got)
	}
	if in.Misses.Load() != 1 {
		t.Errorf("misses %d, want 1", in.Misses.Load())
	}
	runtime.KeepAlive(b)
	for _, d := range []*metric.Desc{
		metric.NewDesc("x", "h", metric.Counter, "a", "1"),
		metric.NewDesc("x", "h", metric.Gauge, "a", "1"),
		metric.NewDesc("x", "h2", metric.Gauge, "a", "1"),
		metric.NewDesc("x", "h", metric.Gauge, "a", "2"),
		metric.NewDesc("x", "h", metric.Gauge, "b", "1"),
		metric.NewDesc("x", "h", metric.Gauge, "a", "1", "b", "1"),
		metric.NewDesc("x", "h", metric.Gauge),
	} {
		for _, e := range []*metric.Desc{
			metric.NewDesc("x", "h", metric.Counter, "a", "1"),
			metric.NewDesc("x", "h", metric.Gauge, "a", "1"),
		} {
			want := d.Type == e.Type && d.Help == e.Help && len(d.Labels) == len(e.Labels) && d.Labels[0] == e.Labels[0]
			if got := keyMatches(d, internKey(e)); got != want {
				t.Errorf("keyMatches(%+v, key of %+v) = %v", d, e, got)
			}
		}
	}
}
