package wire

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestScaledWholeNumbers: scaled's shortcut for scale 0 accepts exactly the
// values the general rule (round v·10^0, check it divides back to v bit for
// bit) accepts, with the same integer, so the encoded bytes do not change.
func TestScaledWholeNumbers(t *testing.T) {
	general := func(v float64) (int64, bool) {
		if !(v >= -(1<<53) && v <= 1<<53) {
			return 0, false
		}
		m := int64(math.Round(v))
		return m, math.Float64bits(float64(m)/pow10[0]) == math.Float64bits(v)
	}
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 1.5, 2.5, 1e15, 1 << 53, -(1 << 53), 1<<53 + 2,
		-(1<<53 + 2), math.Nextafter(1<<53, 0), 123456789.000001, math.NaN(), math.Inf(1), math.Inf(-1),
		math.SmallestNonzeroFloat64, math.MaxFloat64, 0.1, 4.999999999999999}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		vals = append(vals, float64(r.Int64N(1<<54)-1<<53), r.NormFloat64()*1e6, math.Float64frombits(r.Uint64()))
	}
	for _, v := range vals {
		gm, gok := general(v)
		m, ok := scaled(v, 0)
		if ok != gok || (ok && m != gm) {
			t.Fatalf("scaled(%v, 0) = %d, %v; the general rule gives %d, %v", v, m, ok, gm, gok)
		}
	}
}
