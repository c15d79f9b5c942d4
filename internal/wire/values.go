package wire

import (
	"math"
	"math/bits"
)

// Values are coded per series against that series' previous value. Most
// node data are decimal numbers with a fixed number of digits (jiffies/100,
// bytes, milliseconds/1000), so a value is first written as a scaled
// integer m with v == m / 10^scale exactly; the residual against a
// prediction (the previous m, or previous m plus its last change for series
// that behave like steady counters) goes into a prefix code. Values with no
// such form (ratios, NaN, Inf, -0) fall back to Gorilla's XOR of the float
// bits. Codes (MSB first):
//
//	0            value equals the prediction
//	10     +7    zigzag residual < 2^7
//	110    +14   zigzag residual < 2^14
//	1110   +24   zigzag residual < 2^24
//	11110  +6+n  zigzag residual of n bits (6 bits hold n-1)
//	111110 +4+6+n  new scale, then zigzag m of n bits
//	111111 +xor  float: 0 + bits in the last window, or 1 + 6b lead + 6b len-1 + bits

const maxScale = 9

var pow10 = [maxScale + 1]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// valState is what encoder and decoder both remember about one series.
// The zero value is a valid start: the value 0 as an integer.
type valState struct {
	m     int64 // previous value: scaled integer, or its float bits in float mode
	delta int64 // last change of m (scaled mode)
	scale int8  // decimal digits of m; -1: float mode
	score int8  // > 0: predict m+delta, else m
	lead  uint8 // XOR window of the previous float-mode value
	trail uint8
}

// scaled reports whether v == m/10^s exactly for an integer m of at most 53 bits.
// Its m is meaningful only when it reports true.
func scaled(v float64, s int8) (int64, bool) {
	if s == 0 {
		// Whole numbers, most of a node's values: no rounding, no division.
		if !(v >= -(1<<53) && v <= 1<<53) {
			return 0, false
		}
		m := int64(v)
		return m, math.Float64bits(float64(m)) == math.Float64bits(v)
	}
	f := v * pow10[s]
	if !(f >= -(1<<53) && f <= 1<<53) {
		return 0, false // also NaN and Inf
	}
	m := int64(math.Round(f))
	return m, math.Float64bits(float64(m)/pow10[s]) == math.Float64bits(v)
}

func (st *valState) predict() int64 {
	if st.score > 0 {
		return st.m + st.delta
	}
	return st.m
}

// prevBits is the float64 of the previous value.
func (st *valState) prevBits() uint64 {
	if st.scale < 0 {
		return uint64(st.m)
	}
	return math.Float64bits(float64(st.m) / pow10[st.scale])
}

// advance records a new scaled value and updates the predictor choice: a
// series whose change repeats (steady counter) moves to delta prediction,
// one whose change is usually zero or noise stays on the previous value.
func (st *valState) advance(m int64) {
	d := m - st.m
	if ad, add := abs64(d), abs64(d-st.delta); ad < add {
		if st.score > -2 {
			st.score--
		}
	} else if add < ad {
		if st.score < 2 {
			st.score++
		}
	}
	st.delta, st.m = d, m
}

func abs64(v int64) uint64 {
	if v < 0 {
		return uint64(-v)
	}
	return uint64(v)
}

func encodeValue(w *bitWriter, st *valState, v float64) {
	vb := math.Float64bits(v)
	if st.scale >= 0 {
		if m, ok := scaled(v, st.scale); ok {
			writeResidual(w, zigzag(m-st.predict()))
			st.advance(m)
			return
		}
	} else if vb == uint64(st.m) {
		w.writeBits(0, 1)
		return
	}
	for s := int8(0); s <= maxScale; s++ {
		if m, ok := scaled(v, s); ok {
			u := zigzag(m)
			n := uint(bits.Len64(u))
			if n == 0 {
				n = 1
			}
			w.writeBits(0b111110, 6)
			w.writeBits(uint64(s), 4)
			w.writeBits(uint64(n-1), 6)
			w.writeBits(u, n)
			*st = valState{m: m, scale: s}
			return
		}
	}
	w.writeBits(0b111111, 6)
	xor := vb ^ st.prevBits()
	lead, trail := uint8(bits.LeadingZeros64(xor)), uint8(bits.TrailingZeros64(xor))
	if xor == 0 {
		lead, trail = 63, 0
	}
	if st.scale < 0 && lead >= st.lead && trail >= st.trail {
		w.writeBits(0, 1)
		w.writeBits(xor>>st.trail, uint(64-st.lead-st.trail))
	} else {
		n := 64 - lead - trail
		w.writeBits(1, 1)
		w.writeBits(uint64(lead), 6)
		w.writeBits(uint64(n-1), 6)
		w.writeBits(xor>>trail, uint(n))
		st.lead, st.trail = lead, trail
	}
	st.m, st.scale, st.delta, st.score = int64(vb), -1, 0, 0
}

func writeResidual(w *bitWriter, u uint64) {
	switch {
	case u == 0:
		w.writeBits(0, 1)
	case u < 1<<7:
		w.writeBits(0b10<<7|u, 9)
	case u < 1<<14:
		w.writeBits(0b110<<14|u, 17)
	case u < 1<<24:
		w.writeBits(0b1110<<24|u, 28)
	default:
		n := uint(bits.Len64(u))
		w.writeBits(0b11110<<6|uint64(n-1), 11)
		w.writeBits(u, n)
	}
}

// decodeValue mirrors encodeValue; it reports false on a malformed code.
func decodeValue(r *bitReader, st *valState) (float64, bool) {
	ones := uint(0)
	for ones < 6 && r.readBits(1) == 1 {
		ones++
	}
	if r.err {
		return 0, false
	}
	var u uint64
	switch ones {
	case 0:
		if st.scale < 0 {
			return math.Float64frombits(uint64(st.m)), true
		}
	case 1:
		u = r.readBits(7)
	case 2:
		u = r.readBits(14)
	case 3:
		u = r.readBits(24)
	case 4:
		u = r.readBits(uint(r.readBits(6)) + 1)
	case 5:
		s := int8(r.readBits(4))
		m := unzigzag(r.readBits(uint(r.readBits(6)) + 1))
		if r.err || s > maxScale {
			return 0, false
		}
		*st = valState{m: m, scale: s}
		return float64(m) / pow10[s], true
	case 6:
		var xor uint64
		if r.readBits(1) == 0 {
			if st.scale >= 0 {
				return 0, false // no window to reuse
			}
			xor = r.readBits(uint(64-st.lead-st.trail)) << st.trail
		} else {
			lead := uint8(r.readBits(6))
			n := uint8(r.readBits(6)) + 1
			if int(lead)+int(n) > 64 {
				return 0, false
			}
			st.lead, st.trail = lead, 64-lead-n
			xor = r.readBits(uint(n)) << st.trail
		}
		if r.err {
			return 0, false
		}
		bits := st.prevBits() ^ xor
		st.m, st.scale, st.delta, st.score = int64(bits), -1, 0, 0
		return math.Float64frombits(bits), true
	}
	if r.err || st.scale < 0 {
		return 0, false // a residual needs a scaled previous value
	}
	m := st.predict() + unzigzag(u)
	st.advance(m)
	return float64(m) / pow10[st.scale], true
}

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// bitWriter appends bits, most significant first, to buf.
type bitWriter struct {
	buf []byte
	acc uint64 // pending bits, right-aligned
	n   uint   // number of pending bits, < 8 between calls
}

func (w *bitWriter) writeBits(v uint64, nb uint) {
	if nb > 32 {
		w.writeBits(v>>32, nb-32)
		v, nb = v&(1<<32-1), 32
	}
	w.acc = w.acc<<nb | v&(1<<nb-1)
	w.n += nb
	for w.n >= 8 {
		w.n -= 8
		w.buf = append(w.buf, byte(w.acc>>w.n))
	}
	w.acc &= 1<<w.n - 1
}

// flush pads the last byte with zero bits and returns the buffer.
func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.buf = append(w.buf, byte(w.acc<<(8-w.n)))
	}
	w.acc, w.n = 0, 0
	return w.buf
}

// bitReader reads bits written by bitWriter; reading past the end sets err
// and yields zeros.
type bitReader struct {
	buf []byte
	pos int
	acc uint64
	n   uint
	err bool
}

func (r *bitReader) readBits(nb uint) uint64 {
	if nb > 32 {
		hi := r.readBits(nb - 32)
		return hi<<32 | r.readBits(32)
	}
	for r.n < nb {
		if r.pos >= len(r.buf) {
			r.err = true
			return 0
		}
		r.acc = r.acc<<8 | uint64(r.buf[r.pos])
		r.pos++
		r.n += 8
	}
	r.n -= nb
	v := r.acc >> r.n & (1<<nb - 1)
	r.acc &= 1<<r.n - 1
	return v
}
