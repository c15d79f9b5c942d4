package infodesc

import (
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/internal/metric"
)

func TestGetReusesUntilChange(t *testing.T) {
	i := New("x_info", "h", metric.Gauge, "a", "b")
	d1 := i.Get([][]byte{[]byte("1"), []byte("2")})
	if d2 := i.Get([][]byte{[]byte("1"), []byte("2")}); d2 != d1 {
		t.Fatal("same values gave a new descriptor")
	}
	d3 := i.Get([][]byte{[]byte("1"), []byte("3")})
	if d3 == d1 || d3.Labels[1].Value != "3" {
		t.Fatalf("changed value: got %+v", d3.Labels)
	}
	long := i.Get([][]byte{[]byte(strings.Repeat("x", 1000)), nil})
	if len(long.Labels[0].Value) != MaxValue {
		t.Fatalf("label value length %d, want %d", len(long.Labels[0].Value), MaxValue)
	}
	if i.Get([][]byte{[]byte(strings.Repeat("x", 1000)), nil}) != long {
		t.Fatal("clipped value not recognised as unchanged")
	}
	if n := testing.AllocsPerRun(20, func() { i.Get([][]byte{[]byte("x"), []byte("y")}) }); n != 0 {
		// AllocsPerRun warms up once: the descriptor exists by then
		t.Fatalf("allocs %v", n)
	}
}
