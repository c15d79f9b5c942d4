package pattern

import (
	"math/rand/v2"
	"testing"
)

// compareAtLeast may give up on a pattern only when the full comparison
// would end below the bar; when it goes through, its counts are the full
// ones. Checked against a plain count on random templates.
func TestCompareAtLeastGivesUpOnlyBelowBar(t *testing.T) {
	words := []string{"a", "b", "c", Wildcard, "x=<*>", "x=1", "(<*>)", "(7)"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 1 + rng.IntN(8)
		tpl, sig := make([]string, n), make([]string, n)
		for i := range n {
			tpl[i], sig[i] = words[rng.IntN(len(words))], words[rng.IntN(len(words))]
		}
		same, diff := 0, 0
		for i, pt := range tpl {
			if pt == Wildcard {
				continue
			}
			if matches(pt, sig[i]) {
				same++
			} else {
				diff++
			}
		}
		for _, bar := range []float64{0.3, 0.5, 2.0 / 3, 0.9, 1} {
			s, d, ok := compareAtLeast(tpl, sig, bar)
			full := float64(same) / float64(same+diff)
			switch {
			case ok && (s != same || d != diff):
				t.Fatalf("%q vs %q: counts %d/%d, want %d/%d", tpl, sig, s, d, same, diff)
			case !ok && full >= bar:
				t.Fatalf("%q vs %q: gave up at bar %v, yet similarity is %v", tpl, sig, bar, full)
			}
		}
	}
}

// plainConstant may skip maskToken only where maskToken would leave the
// token constant: random tokens of unclassed bytes, and the literals.
func TestPlainConstantAgreesWithMaskToken(t *testing.T) {
	var plain []byte
	for c := range 256 {
		if class[c] == 0 {
			plain = append(plain, byte(c))
		}
	}
	letters := []byte("abcdefnNtTfFxyz!?")
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(b []byte) {
		var f uint8
		for _, c := range b {
			f |= class[c]
		}
		if f == 0 && plainConstant(b) {
			if _, wild := maskToken(nil, b, 0); wild {
				t.Fatalf("%q: plainConstant, yet maskToken masks it", b)
			}
		}
	}
	for _, w := range []string{"true", "false", "null", "nil", "none", "None", "NULL", "True", "False", "deadbeef", "cafebabe!", "done!", "ok?", "x"} {
		check([]byte(w))
	}
	for range 200000 {
		src := plain
		if rng.IntN(2) == 0 {
			src = letters
		}
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			b[i] = src[rng.IntN(len(src))]
		}
		check(b)
	}
}
