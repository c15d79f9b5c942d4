package simulate

import (
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func BenchmarkNewNode(b *testing.B) {
	sch := NewSchema(16)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		NewNode(NodeName(int(i)), sch, i)
	}
}

// BenchmarkSample is the simulator's cost per node and tick.
func BenchmarkSample(b *testing.B) {
	n := NewNode("cn00001", NewSchema(16), 1)
	var batch metric.Batch
	t := time.Unix(1_763_800_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		t = t.Add(time.Second)
		batch.Reset(t)
		n.Sample(t, time.Second, &batch)
	}
}
